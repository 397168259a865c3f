/* no_rng_stash, no_rng_stash_nr: the recompute runs without restoring the
 * RNG state the forward started from (and without forking), so dropout
 * masks and RReLU slopes are drawn afresh and differ from the forward's.
 * Real failure: checkpointing random ops with preserve_rng_state off, or a
 * custom checkpoint that forgets to stash the generator.
 * Caught by: gradient comparison at step 1 (both styles); with
 * --verify-values the non-reentrant value check names the first recomputed
 * mask that differs. Not observable when nothing random runs in a segment
 * (dropout = 0 outside rrelu_mlp). Both styles are planted: the reentrant
 * one shows it through its nested backward only, the non-reentrant one also
 * through its saved-tensor check. */
#include "faulty.h"

/* The replay service that forgets the stash: nothing is put in force, nothing forked. */
static int rng_replay_nothing(const struct rng_stash *forward, struct rng_stash *surrounding, int *forked)
{
    (void)forward;
    (void)surrounding;
    (void)forked;
    return ST_OK;
}

static const struct checkpoint_services no_rng_stash_services = {.rng_replay = rng_replay_nothing};

const struct checkpoint_impl impl_no_rng_stash = {
    .name = "no_rng_stash",
    .summary = "planted bug: reentrant, recompute without restoring the RNG state",
    .run = impl_run_reentrant,
    .services = &no_rng_stash_services,
    .observable = faulty_replays_rng,
};

const struct checkpoint_impl impl_no_rng_stash_nr = {
    .name = "no_rng_stash_nr",
    .summary = "planted bug: non-reentrant, recompute without restoring the RNG state",
    .run = impl_run_nonreentrant,
    .services = &no_rng_stash_services,
    .observable = faulty_replays_rng,
};
