/* leaked_recompute_frame: the non-reentrant checkpoint keeps a reference
 * to every tensor its recompute produced, and its frame stays referenced
 * after backward (as from a registry of frames, or a cycle through the
 * graph that nothing breaks). Gradients are bitwise right; each step leaves
 * its recomputed activations allocated, so live memory grows step by step
 * until an out-of-memory error. The run holds the frames and frees them
 * when it ends (impl_stats_hold), so the process itself leaks nothing.
 * Real failure: PyTorch #80151, the non-reentrant CheckpointWrapper
 * gradually leaking memory until CUDA OOM.
 * Caught by: the live bytes at the start of step 2 exceed step 1's
 * (harness/verify/run_checks.c); needs at least two steps. */
#include <stdio.h>

#include "faulty.h"

static int leaked_recompute_frame_observable(const struct ckpt_case *c, char *why, size_t len)
{
    if (!faulty_has_checkpoints(c, why, len))
        return 0;
    if (c->steps < 2) {
        snprintf(why, len, "steps = 1: no later step starts with the leaked frame still alive");
        return 0;
    }
    return 1;
}

const struct checkpoint_impl impl_leaked_recompute_frame = {
    .name = "leaked_recompute_frame",
    .summary = "planted bug: non-reentrant, recompute frame and its tensors kept alive after backward (leak)",
    .run = impl_run_nonreentrant,
    .mutation = {.leak_recompute_frame = 1},
    .observable = leaked_recompute_frame_observable,
};
