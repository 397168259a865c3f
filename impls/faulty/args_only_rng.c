/* args_only_rng: stashes the RNG state of CPU and of the devices its tensor
 * arguments are on, not of the current device (PyTorch's own policy).
 * Real failure: a segment that creates tensors on a device none of its
 * arguments lives on (e.g. moves work to another GPU, or gets only CPU
 * arguments and draws on the current GPU): that device's generator is not
 * replayed and the recompute draws different numbers there.
 * Caught by: gradient comparison, but only in such a case: CPU is always
 * stashed, and every harness model keeps a segment's arguments and its draws
 * on the case's device, so args-only and args+current stash the same set.
 * Its rule therefore reports NOT_OBSERVABLE everywhere, with the reason; a
 * model that draws off its arguments' device on a multi-GPU host is what it
 * would take to see it. */
#include <stdio.h>
#include <string.h>

#include "../../harness/aten/aten.h"
#include "faulty.h"

static int args_only_rng_observable(const struct ckpt_case *c, char *why, size_t len)
{
    if (strcmp(c->device, "cpu") == 0)
        snprintf(why, len, "CPU case: CPU's generator is always stashed and is the only one drawn from");
    else if (aten_device_count() < 2)
        snprintf(why, len, "one CUDA device: the segment's arguments are on the current device already");
    else
        snprintf(why, len, "no harness model draws on a device none of a segment's arguments is on");
    return 0;
}

const struct checkpoint_impl impl_args_only_rng = {
    .name = "args_only_rng",
    .summary = "planted bug: reentrant, RNG stashed for the arguments' devices only, not the current one",
    .run = impl_run_reentrant,
    .mutation = {.force_args_only_rng = 1},
    .observable = args_only_rng_observable,
};
