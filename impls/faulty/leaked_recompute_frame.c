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
 * (harness/judge/run_checks.c); needs at least two steps. */
#include <stdio.h>
#include <stdlib.h>

#include "faulty.h"

/* What one recompute leaks: a reference to each tensor it produced, and
 * to the frame (its saved inputs, its store), held by the run. */
struct leaked_recompute {
    struct saved_store *store;
    int n;
    tensor *recomputed[];
};

static void leaked_recompute_free(void *object)
{
    struct leaked_recompute *leak = object;
    for (int i = 0; i < leak->n; i++)
        tensor_free(leak->recomputed[i]);
    saved_store_release(leak->store);
    free(leak);
}

/* The recompute_done service that keeps what the recompute produced: the
 * unpacks still hand each tensor out and drop the store's own reference,
 * but this one lives until the run ends. */
static int keep_recomputed(struct saved_store *store)
{
    if (!store->stats)
        return ST_OK;
    struct leaked_recompute *leak = calloc(1, sizeof *leak + (size_t)store->n_handles * sizeof leak->recomputed[0]);
    if (!leak)
        return error_set(ST_RUN, "out of memory keeping recomputed tensors");
    leak->store = store;
    saved_store_retain(store);
    int st = ST_OK;
    for (int k = 0; k < store->n_handles && !st; k++)
        if (store->recomputed[k] && !(st = tensor_share(&leak->recomputed[leak->n], store->recomputed[k])))
            leak->n++;
    if (!st)
        st = impl_stats_hold(store->stats, leak, leaked_recompute_free);
    if (st)
        leaked_recompute_free(leak);
    return st;
}

static const struct checkpoint_services leaked_recompute_frame_services = {.recompute_done = keep_recomputed};

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
    .services = &leaked_recompute_frame_services,
    .observable = leaked_recompute_frame_observable,
};
