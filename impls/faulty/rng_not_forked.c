/* rng_not_forked: the recompute replays the forward's RNG state but does not
 * fork: the generator is left where the recompute stopped instead of being
 * put back, so the surrounding stream rewinds and step 2 draws masks that
 * step 1 already used.
 * Real failure: restoring the stashed state with a plain set_rng_state
 * instead of inside a fork_rng block.
 * Caught by: gradient comparison at step 2 (step 1 is bitwise right).
 * Reentrant base: its recompute runs once per segment in reverse order, so
 * the leak is exactly "the stream ends after the first segment's draws".
 * Not observable with one step, nothing random to replay, or when the only
 * checkpointed segment holds every random draw (one layer, segments every). */
#include <stdio.h>

#include "faulty.h"

/* A plain set_rng_state: the forward's states are put in force, the
 * surrounding ones are not saved, so nothing puts them back. */
static int rng_replay_unforked(const struct rng_stash *forward, struct rng_stash *surrounding, int *forked)
{
    (void)surrounding;
    (void)forked;
    return rng_stash_restore(forward);
}

static const struct checkpoint_services rng_not_forked_services = {.rng_replay = rng_replay_unforked};

static int rng_not_forked_observable(const struct ckpt_case *c, char *why, size_t len)
{
    if (!faulty_replays_rng(c, why, len))
        return 0;
    if (c->steps < 2) {
        snprintf(why, len, "steps = 1: the leaked stream would only show in the next step");
        return 0;
    }
    if (c->layers == 1 && c->segments == 0) {
        snprintf(why, len, "the one checkpointed layer holds every draw: the leaked stream ends where it should");
        return 0;
    }
    return 1;
}

const struct checkpoint_impl impl_rng_not_forked = {
    .name = "rng_not_forked",
    .summary = "planted bug: reentrant, RNG replayed without fork (stream leaks into the next step)",
    .run = impl_run_reentrant,
    .services = &rng_not_forked_services,
    .observable = rng_not_forked_observable,
};
