/* services: what a reference checkpoint asks the world for — RNG stash and
 * replay, autocast replay, module-state replay, the nested backward, and the
 * saved-tensor store's policy, cache, counter and lifetimes — as one table.
 * The references run with checkpoint_services_reference; a planted bug
 * (impls/faulty/, or a plugin's) is a reference run with one service
 * replaced, so the reference logic never asks whether it is the buggy one. */
#ifndef CKPT_SERVICES_H
#define CKPT_SERVICES_H

#include "autocast.h"
#include "module_state.h"
#include "rng_stash.h"
#include "saved_store.h"
#include "tape.h"

struct checkpoint_services {
    /* --- RNG (checkpoint_env.c) --- */
    /* The device policy the forward stashes under, given the run's. */
    enum rng_devices (*rng_devices)(enum rng_devices requested);
    /* Before a recompute: put the forward's states in force. A forked
     * replay saves the surrounding states in *surrounding and sets *forked,
     * so the recompute's draws do not move the caller's streams. */
    int (*rng_replay)(const struct rng_stash *forward, struct rng_stash *surrounding, int *forked);
    /* Selective: whether a recompute replays RNG at all when the policy
     * keeps the saved tensors of kept_ops (a bit set over enum policy_op).
     * The reference always does: the recompute reruns the whole segment. */
    int (*rng_replay_needed)(unsigned kept_ops);

    /* --- autocast and module state (checkpoint_env.c) --- */
    /* Before a recompute: put the forward's autocast state in force. */
    void (*autocast_replay)(struct autocast_state forward);
    /* Before a recompute: point the model's buffers where the recompute
     * reads and writes them (module_state_recompute_enter). */
    int (*state_replay)(struct module_state *state, const struct state_snapshot *forward,
                        struct state_recompute *frame);

    /* --- the reentrant nested backward (reentrant.c) --- */
    /* Backward from the recompute's outputs roots[0..n) with grads[0..n). */
    int (*nested_backward)(struct var *const *roots, tensor *const *grads, int n);

    /* --- the non-reentrant saved-tensor store (nonreentrant.c) --- */
    /* Selective policy lookup: whether the saved tensors of op (enum
     * policy_op, -1 for an op the policy cannot name) are kept from
     * forward under policy. */
    int (*policy_keeps)(unsigned policy, int op);
    /* Forward saved t as handle k, which the policy does not keep: the
     * store may keep it anyway (the reference keeps nothing). */
    int (*keep_forward)(struct saved_store *store, int k, const tensor *t);
    /* An unpack of handle k the policy did not keep: *out the tensor the
     * store kept for it, or NULL (the reference) for the recomputed one. */
    int (*take_kept)(struct saved_store *store, int k, tensor **out);
    /* Handle bookkeeping, once per unpack: counts it, and may schedule a
     * recompute (recomputed_for = NO_RECOMPUTE) or move slot_offset. */
    void (*count_unpack)(struct saved_store *store);
    /* Selective cache lookup: the handle whose kept tensor serves an
     * unpack of handle k (the reference: k itself). */
    int (*cache_lookup)(const struct saved_store *store, int k);
    /* A kept tensor at unpack: ST_OK if no in-place op changed it since
     * forward (its version then), else the error naming `what`. */
    int (*cache_unchanged)(const tensor *t, int64_t version, const char *what);
    /* Once the forward has run (the reference: nothing). */
    int (*forward_done)(struct saved_store *store);
    /* Once a recompute has filled and checked the store (the reference:
     * nothing; each tensor is dropped by its unpack). */
    int (*recompute_done)(struct saved_store *store);
};

/* The services of the reference checkpoints. */
extern const struct checkpoint_services checkpoint_services_reference;

/* out = the reference services, with every entry `replaced` sets (may be
 * NULL) in place of the reference's: a planted bug names only the service
 * it replaces. */
void checkpoint_services_resolve(struct checkpoint_services *out, const struct checkpoint_services *replaced);

#endif
