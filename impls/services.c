/* services: the reference services (services.h), each what
 * torch.utils.checkpoint does at that point. */
#include "services.h"

#include "../harness/error.h"
#include "policy.h"

static enum rng_devices rng_devices_as_requested(enum rng_devices requested) { return requested; }

/* Fork, then replay: the surrounding states are saved first so that
 * checkpoint_env_exit puts them back (torch.random.fork_rng). */
static int rng_replay_forked(const struct rng_stash *forward, struct rng_stash *surrounding, int *forked)
{
    int st = rng_stash_capture(surrounding, &forward->set);
    if (st)
        return st;
    *forked = 1;
    return rng_stash_restore(forward);
}

static int rng_replay_always(unsigned kept_ops)
{
    (void)kept_ops;
    return 1;
}

static void autocast_replay_forward(struct autocast_state forward) { autocast_set(forward); }

/* The recompute reads a copy of the state its forward found and throws its
 * own updates away. */
static int state_replay_forward(struct module_state *state, const struct state_snapshot *forward,
                                struct state_recompute *frame)
{
    return module_state_recompute_enter(state, forward, STATE_REPLAY, frame);
}

static int nested_backward_once(struct var *const *roots, tensor *const *grads, int n)
{
    return tape_backward(roots, grads, n);
}

static int policy_keeps_named_ops(unsigned policy, int op) { return op >= 0 && (policy & POLICY_BIT(op)); }

static int keep_forward_nothing(struct saved_store *store, int k, const tensor *t)
{
    (void)store;
    (void)k;
    (void)t;
    return ST_OK;
}

static int take_kept_none(struct saved_store *store, int k, tensor **out)
{
    (void)store;
    (void)k;
    *out = NULL;
    return ST_OK;
}

static void count_unpack(struct saved_store *store) { store->unpacks++; }

/* The reference finds the entry by the handle's own index (op,
 * invocation, slot are the handle's). */
static int cache_lookup_own(const struct saved_store *store, int k)
{
    (void)store;
    return k;
}

static int store_untouched(struct saved_store *store)
{
    (void)store;
    return ST_OK;
}

const struct checkpoint_services checkpoint_services_reference = {
    .rng_devices = rng_devices_as_requested,
    .rng_replay = rng_replay_forked,
    .rng_replay_needed = rng_replay_always,
    .autocast_replay = autocast_replay_forward,
    .state_replay = state_replay_forward,
    .nested_backward = nested_backward_once,
    .policy_keeps = policy_keeps_named_ops,
    .keep_forward = keep_forward_nothing,
    .take_kept = take_kept_none,
    .count_unpack = count_unpack,
    .cache_lookup = cache_lookup_own,
    .cache_unchanged = tape_check_version,
    .forward_done = store_untouched,
    .recompute_done = store_untouched,
};

#define RESOLVE(field) out->field = replaced && replaced->field ? replaced->field : checkpoint_services_reference.field

void checkpoint_services_resolve(struct checkpoint_services *out, const struct checkpoint_services *replaced)
{
    RESOLVE(rng_devices);
    RESOLVE(rng_replay);
    RESOLVE(rng_replay_needed);
    RESOLVE(autocast_replay);
    RESOLVE(state_replay);
    RESOLVE(nested_backward);
    RESOLVE(policy_keeps);
    RESOLVE(keep_forward);
    RESOLVE(take_kept);
    RESOLVE(count_unpack);
    RESOLVE(cache_lookup);
    RESOLVE(cache_unchanged);
    RESOLVE(forward_done);
    RESOLVE(recompute_done);
}
