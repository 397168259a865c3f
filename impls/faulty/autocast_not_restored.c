/* autocast_not_restored, autocast_not_restored_nr: the recompute runs with
 * the autocast state of its caller instead of the forward's. The runner, like
 * a training loop, runs backward outside the autocast region, so the
 * recompute runs in float32 while the forward ran in bfloat16/float16.
 * Real failure: checkpoint implementations that did not capture
 * torch.is_autocast_enabled() and its dtype in forward.
 * Caught by: non-reentrant — its metadata check (a recomputed saved tensor
 * has dtype float32; the forward saved bfloat16); reentrant — gradient
 * comparison (the nested backward differentiates a float32 graph).
 * Not observable when the case runs without autocast. */
#include <stdio.h>

#include "faulty.h"

/* The caller's autocast state stays in force. */
static void autocast_replay_nothing(struct autocast_state forward) { (void)forward; }

static const struct checkpoint_services autocast_not_restored_services = {.autocast_replay = autocast_replay_nothing};

static int autocast_observable(const struct ckpt_case *c, char *why, size_t len)
{
    if (!faulty_has_checkpoints(c, why, len))
        return 0;
    if (c->autocast == AUTOCAST_OFF) {
        snprintf(why, len, "autocast = off: forward and recompute run in the same dtype anyway");
        return 0;
    }
    return 1;
}

const struct checkpoint_impl impl_autocast_not_restored = {
    .name = "autocast_not_restored",
    .summary = "planted bug: reentrant, recompute under the caller's autocast state",
    .run = impl_run_reentrant,
    .services = &autocast_not_restored_services,
    .observable = autocast_observable,
};

const struct checkpoint_impl impl_autocast_not_restored_nr = {
    .name = "autocast_not_restored_nr",
    .summary = "planted bug: non-reentrant, recompute under the caller's autocast state",
    .run = impl_run_nonreentrant,
    .services = &autocast_not_restored_services,
    .observable = autocast_observable,
};
