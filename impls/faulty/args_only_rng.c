/* args_only_rng: stashes the RNG state of CPU and of the devices its tensor
 * arguments are on, not of the current device (PyTorch's own policy,
 * rng_devices = args).
 * Real failure: a segment that creates tensors on a device none of its
 * arguments lives on (gets only CPU arguments and draws on the current GPU,
 * or moves work to another GPU): that device's generator is not replayed
 * and the recompute draws different numbers there.
 * Caught by: the checkpoint's forward check (a device left out of the stash
 * drew random numbers: checkpoint_env_check_forward), a FAIL naming the
 * device; without it the gradient comparison. Observable only in a case
 * whose segments draw off their arguments' device: draw_device set to
 * another device than the case's (cases/gpu.ini, gpu_cpu_draws_on_cuda*).
 * Everywhere else args-only and args+current stash the same set and its
 * rule reports NOT_OBSERVABLE with that reason. */
#include <stdio.h>
#include <string.h>

#include "faulty.h"

/* "cuda" is the current CUDA device, cuda:0 for the harness. */
static const char *canonical_device(const char *d) { return strcmp(d, "cuda") == 0 ? "cuda:0" : d; }

/* PyTorch's policy whatever the run asks for. */
static enum rng_devices rng_devices_args_only(enum rng_devices requested)
{
    (void)requested;
    return RNG_ARGS_ONLY;
}

static const struct checkpoint_services args_only_rng_services = {.rng_devices = rng_devices_args_only};

static int args_only_rng_observable(const struct ckpt_case *c, char *why, size_t len)
{
    if (!faulty_replays_rng(c, why, len))
        return 0;
    const char *draws_on = canonical_device(c->draw_device[0] ? c->draw_device : c->device);
    if (strcmp(draws_on, canonical_device(c->device)) != 0)
        return 1;
    if (strcmp(draws_on, "cpu") == 0)
        snprintf(why, len, "CPU case: CPU's generator is always stashed and is the only one drawn from");
    else
        snprintf(why, len, "segments draw on their arguments' device (no other draw_device), which args and "
                           "args+current both stash");
    return 0;
}

const struct checkpoint_impl impl_args_only_rng = {
    .name = "args_only_rng",
    .summary = "planted bug: reentrant, RNG stashed for the arguments' devices only, not the current one",
    .run = impl_run_reentrant,
    .services = &args_only_rng_services,
    .observable = args_only_rng_observable,
};
