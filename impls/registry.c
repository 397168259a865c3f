/* registry: every checkpoint impl by name — the references, then the
 * planted bugs of impls/faulty/ (declared in faulty/faulty.h). */
#include <string.h>

#include "faulty/faulty.h"
#include "impl.h"

static const struct checkpoint_impl impl_none = {
    .name = "none", .summary = "baseline: no checkpointing", .run = impl_run_none, .is_reference = 1};
static const struct checkpoint_impl impl_reentrant = {
    .name = "reentrant",
    .summary = "torch.utils.checkpoint(use_reentrant=True): grad-free forward, nested backward",
    .run = impl_run_reentrant,
    .is_reference = 1};
static const struct checkpoint_impl impl_nonreentrant = {
    .name = "nonreentrant",
    .summary = "torch.utils.checkpoint(use_reentrant=False): saved-tensor hooks, recompute on first unpack",
    .run = impl_run_nonreentrant,
    .is_reference = 1};

static const struct checkpoint_impl *const all_impls[] = {
    &impl_none,
    &impl_reentrant,
    &impl_nonreentrant,
    /* Planted bugs (impls/faulty/), after the references. */
    &impl_no_rng_stash,
    &impl_no_rng_stash_nr,
    &impl_rng_not_forked,
    &impl_args_only_rng,
    &impl_autocast_not_restored,
    &impl_autocast_not_restored_nr,
    &impl_counter_reset,
    &impl_recompute_elided,
    &impl_stale_input,
    &impl_first_call_kernel,
    NULL,
};

const struct checkpoint_impl *const *impl_all(void) { return all_impls; }

const struct checkpoint_impl *impl_find(const char *name)
{
    for (int i = 0; all_impls[i]; i++)
        if (strcmp(all_impls[i]->name, name) == 0)
            return all_impls[i];
    return NULL;
}
