/* counter_reset: non-reentrant handle bookkeeping that restarts its recompute
 * counter part-way through backward. Once half of a frame's handles have
 * been unpacked, the frame believes a new pass began, recomputes, and
 * numbers the recomputed tensors from the unpacks already served: handle k
 * receives the tensor recomputed for handle k + N (its count_unpack
 * service). In a two-layer segment N is one layer, so every
 * handle of the first layer gets the second layer's tensor of the same
 * shape and dtype — no metadata check can see it.
 * Real failure: the counter / storage bookkeeping bugs of saved-tensor-hook
 * checkpoints (a counter not reset, or reset at the wrong time, across
 * recomputes), which hand back a tensor of the right shape and wrong value.
 * Caught by: gradient comparison at step 1; with --verify-values the value
 * check names the first recomputed saved tensor that differs. */
#include "faulty.h"

/* After N = half the handles have been unpacked, the bookkeeping believes
 * a new pass began and recomputes, but numbers the recompute from the N
 * tensors already handed out, so the remaining handles get tensors
 * recomputed for handles N places later. With N one layer of a two-layer
 * segment those have the same shapes: a silent mix-up. */
static void count_unpack_resetting(struct saved_store *store)
{
    store->unpacks++;
    int after = store->n_handles / 2;
    if (after > 0 && store->unpacks == after + 1) {
        store->recomputed_for = NO_RECOMPUTE;
        store->slot_offset = after;
    }
}

static const struct checkpoint_services counter_reset_services = {.count_unpack = count_unpack_resetting};

const struct checkpoint_impl impl_counter_reset = {
    .name = "counter_reset",
    .summary = "planted bug: non-reentrant, handle counter restarts mid-backward (same-shaped wrong tensors)",
    .run = impl_run_nonreentrant,
    .services = &counter_reset_services,
    .observable = faulty_has_checkpoints,
};
