/* recompute_elided: the non-reentrant checkpoint keeps every forward
 * activation alive and hands it back at unpack; nothing is recomputed.
 * Gradients are bitwise right, and no memory is saved.
 * Real failure: a compiler pass (XLA's common-subexpression elimination)
 * merging the recompute with the original forward, undoing checkpointing.
 * Caught by: the memory check only — MEMFAIL in cases that set
 * min_memory_saving; without that key its rule reports NOT_OBSERVABLE. */
#include <stdio.h>

#include "faulty.h"

static int recompute_elided_observable(const struct ckpt_case *c, char *why, size_t len)
{
    if (!faulty_has_checkpoints(c, why, len))
        return 0;
    if (c->min_memory_saving < 0) {
        snprintf(why, len, "no min_memory_saving: gradients stay right, only a memory check can see it");
        return 0;
    }
    return 1;
}

const struct checkpoint_impl impl_recompute_elided = {
    .name = "recompute_elided",
    .summary = "planted bug: non-reentrant, forward activations kept and handed back (no memory saved)",
    .run = impl_run_nonreentrant,
    .mutation = {.keep_forward_tensors = 1},
    .observable = recompute_elided_observable,
};
