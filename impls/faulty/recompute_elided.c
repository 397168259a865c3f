/* recompute_elided: the non-reentrant checkpoint keeps every forward
 * activation alive and hands it back at unpack; nothing is recomputed.
 * Gradients are bitwise right, and no memory is saved.
 * Real failure: a compiler pass (XLA's common-subexpression elimination)
 * merging the recompute with the original forward, undoing checkpointing.
 * Caught by: the memory checks only — MEMFAIL wherever a segment is
 * checkpointed: it holds more at the end of forward than the prediction
 * (judge.c held_requirement), and less saved than min_memory_saving asks. */
#include <stdio.h>

#include "faulty.h"

/* The store service that keeps what the policy did not ask for: every
 * forward tensor is kept (pack) and handed back (unpack), so the recompute
 * never runs. The frame frees them when it dies. */
static int keep_every_forward(struct saved_store *store, int k, const tensor *t)
{
    return tensor_share(&store->kept[k], t);
}

static int take_forward(struct saved_store *store, int k, tensor **out) { return tensor_share(out, store->kept[k]); }

static const struct checkpoint_services recompute_elided_services = {
    .keep_forward = keep_every_forward,
    .take_kept = take_forward,
};

static int recompute_elided_observable(const struct ckpt_case *c, char *why, size_t len)
{
    return faulty_has_checkpoints(c, why, len);
}

const struct checkpoint_impl impl_recompute_elided = {
    .name = "recompute_elided",
    .summary = "planted bug: non-reentrant, forward activations kept and handed back (no memory saved)",
    .run = impl_run_nonreentrant,
    .services = &recompute_elided_services,
    .observable = recompute_elided_observable,
};
