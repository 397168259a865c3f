/* registry: every checkpoint impl by name — the references, then the
 * planted bugs of impls/faulty/ (declared in faulty/faulty.h), then those
 * of plugins loaded with --impl-lib (plugin.h). */
#include <ctype.h>
#include <dlfcn.h>
#include <string.h>

#include "../harness/error.h"
#include "faulty/faulty.h"
#include "impl.h"
#include "plugin.h"

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

static const struct checkpoint_impl impl_selective = {
    .name = "selective",
    .summary = "selective checkpointing: non-reentrant, the policy's ops keep their saved tensors, the rest recomputed",
    .run = impl_run_selective,
    .is_reference = 1};

static const struct checkpoint_impl *const builtin_impls[] = {
    &impl_none,
    &impl_reentrant,
    &impl_nonreentrant,
    &impl_selective,
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
    &impl_policy_ignored,
    &impl_attention_swapped_for_dropout,
    &impl_stale_cache,
    &impl_mutated_saved_output,
    &impl_rng_op_saved_without_replay,
    &impl_state_double_update,
    &impl_scale_not_restored,
    &impl_amax_updated_in_recompute,
    &impl_hook_fires_twice,
    &impl_leaked_recompute_frame,
    NULL,
};

/* The built-ins followed by plugin impls, NULL-terminated. Global, but
 * written only while the CLI loads plugins, before any case runs; read-only
 * after that. */
#define MAX_IMPLS 96
static const struct checkpoint_impl *all_impls[MAX_IMPLS + 1];

static int impl_count(void)
{
    if (!all_impls[0])
        for (int i = 0; builtin_impls[i]; i++)
            all_impls[i] = builtin_impls[i];
    int n = 0;
    while (all_impls[n])
        n++;
    return n;
}

const struct checkpoint_impl *const *impl_all(void)
{
    impl_count();
    return all_impls;
}

const struct checkpoint_impl *impl_find(const char *name)
{
    impl_count();
    for (int i = 0; all_impls[i]; i++)
        if (strcmp(all_impls[i]->name, name) == 0)
            return all_impls[i];
    return NULL;
}

int impl_is_reentrant(const struct checkpoint_impl *impl)
{
    /* stale_input wraps impl_run_reentrant in its own run function. */
    return impl->run == impl_run_reentrant || impl == &impl_stale_input;
}

static int is_impl_name(const char *s)
{
    if (!s || !*s || strlen(s) >= 32)
        return 0;
    for (; *s; s++)
        if (!(isalnum((unsigned char)*s) || *s == '_'))
            return 0;
    return 1;
}

int impl_load_plugin(const char *path)
{
    /* RTLD_NOW: a plugin that calls a function this binary lacks fails
     * here, with the symbol's name, not halfway through a run. */
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return error_set(ST_INPUT, "%s: cannot load plugin: %s", path, dlerror());
    ckpt_plugin_entry entry;
    *(void **)&entry = dlsym(lib, CKPT_PLUGIN_SYMBOL);
    const struct ckpt_plugin *p = entry ? entry() : NULL;
    int st = ST_OK;
    if (!entry)
        st = error_set(ST_INPUT, "%s: not a ckpt-verify plugin: no symbol %s", path, CKPT_PLUGIN_SYMBOL);
    else if (!p)
        st = error_set(ST_INPUT, "%s: %s() returned NULL", path, CKPT_PLUGIN_SYMBOL);
    else if (p->abi_version != CKPT_PLUGIN_ABI_VERSION || p->impl_size != sizeof(struct checkpoint_impl))
        st = error_set(ST_INPUT, "%s: plugin built for ABI version %d (impl size %zu), this harness loads version %d "
                                 "(impl size %zu): rebuild it against impls/plugin.h",
                       path, p->abi_version, p->impl_size, CKPT_PLUGIN_ABI_VERSION, sizeof(struct checkpoint_impl));
    else if (p->n_impls < 1 || !p->impls)
        st = error_set(ST_INPUT, "%s: plugin declares no impls", path);
    int n = impl_count();
    for (int i = 0; !st && i < p->n_impls; i++) {
        const struct checkpoint_impl *impl = p->impls[i];
        if (!impl || !is_impl_name(impl->name) || !impl->run)
            st = error_set(ST_INPUT, "%s: impl #%d has no valid name (letters, digits, '_') or no run function",
                           path, i);
        else if (impl_find(impl->name))
            st = error_set(ST_INPUT, "%s: impl '%s' exists already", path, impl->name);
        else if (n + i >= MAX_IMPLS)
            st = error_set(ST_INPUT, "%s: more than %d impls in all", path, MAX_IMPLS);
    }
    if (st) {
        dlclose(lib);
        return st;
    }
    /* The library stays loaded for the process: its impls are in use. */
    for (int i = 0; i < p->n_impls; i++)
        all_impls[n + i] = p->impls[i];
    return ST_OK;
}
