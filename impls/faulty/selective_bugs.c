/* selective_bugs: the planted bugs of selective checkpointing
 * (impls/selective.c), each selective with one service of its cache or of
 * its replay replaced (services.h), and the rule that says in which cases
 * each can show.
 *
 * policy_ignored: every saved tensor is cached, whatever the policy says.
 *   Gradients stay right, memory is not saved. Real failure: a policy
 *   function that returns MUST_SAVE for every op (a default that is never
 *   overridden, an op-name mismatch that falls through to "save").
 *   Caught by: the memory checks (MEMFAIL): it holds more at the end of
 *   forward than the policy's prediction, and saves less than min_memory_saving.
 * attention_swapped_for_dropout: the policy lookup answers for the
 *   attention what it should for the block's dropout and the other way
 *   round, so save_matmuls keeps the bias-dropout-add masks and recomputes
 *   the attention. Gradients stay right (every recompute replays RNG).
 *   Real failure: a policy keyed on op names that match the wrong op (a
 *   substring or table-order slip). Caught by: the held-bytes judgement
 *   and, independently of the policy parser and the prediction, the
 *   policy's statement (harness/judge/policy_statement.h): its kept ops
 *   and, for the gpt block, its bytes.
 * stale_cache: the cache is looked up one invocation off, so a call of an
 *   op gets the cached tensor its previous call in the checkpoint saved
 *   (same op, same shape: nothing downstream notices). Real failure:
 *   PyTorch issues about selective checkpointing's cached outputs reused at
 *   the wrong invocation. Caught by: gradient comparison.
 * mutated_saved_output: a cached tensor is changed by an in-place op after
 *   forward, and the version check that would refuse it is skipped. Real
 *   failure: an in-place op on a tensor the policy saved, with no version
 *   counter check on the cache. Caught by: gradient comparison.
 * rng_op_saved_without_replay: with the random ops' saved tensors (dropout
 *   masks) cached, the recompute is taken to need no RNG replay; but the
 *   ops after them are recomputed from a fresh draw. Caught by: gradient
 *   comparison. */
#include <stdio.h>
#include <string.h>

#include "case_policy.h"
#include "faulty.h"

/* policy_ignored's policy lookup: every op is kept. */
static int policy_keeps_everything(unsigned policy, int op)
{
    (void)policy;
    (void)op;
    return 1;
}

/* attention_swapped_for_dropout's lookup: the attention and the block's
 * dropout answer for each other. */
static int policy_keeps_swapped(unsigned policy, int op)
{
    if (op == POP_CAUSAL_ATTENTION)
        op = POP_BIAS_DROPOUT_ADD;
    else if (op == POP_BIAS_DROPOUT_ADD)
        op = POP_CAUSAL_ATTENTION;
    return op >= 0 && (policy & POLICY_BIT(op));
}

/* stale_cache's lookup, off by one invocation: it finds the same saved
 * tensor of the op's previous call in this checkpoint (when that one has
 * the same shape and dtype, so nothing downstream notices). */
static int cache_lookup_previous_call(const struct saved_store *store, int k)
{
    const struct saved_meta *m = &store->meta[k];
    for (int j = k - 1; j >= 0; j--) {
        const struct saved_meta *o = &store->meta[j];
        if (o->cached && store->kept[j] && strcmp(o->op, m->op) == 0 && o->slot == m->slot &&
            o->invocation == m->invocation - 1 && o->dtype == m->dtype && o->ndim == m->ndim &&
            memcmp(o->shape, m->shape, (size_t)m->ndim * sizeof m->shape[0]) == 0)
            return j;
    }
    return k;
}

/* mutated_saved_output's cache: after the forward, an in-place op changes
 * the last cached activation (the first tensor its op saved: an input, a
 * mask, q), as a buffer reused by user code or a memory planner would;
 * and the unpack no longer checks the version counter that would refuse
 * it. One service, the cache's guard, at its two ends. */
static int change_last_cached(struct saved_store *store)
{
    for (int k = store->n_handles - 1; k >= 0; k--)
        if (store->meta[k].cached && store->meta[k].slot == 0 && store->kept[k])
            return tensor_add_(store->kept[k], store->kept[k], 1.0 / 1024.0);
    return ST_OK;
}

static int cache_unchanged_unchecked(const tensor *t, int64_t version, const char *what)
{
    (void)t;
    (void)version;
    (void)what;
    return ST_OK;
}

/* rng_op_saved_without_replay: with the random ops' saved tensors kept,
 * the recompute is taken to need no RNG, but the ops after them are
 * recomputed from a fresh draw. */
static int rng_replay_needed_unless_random_kept(unsigned kept_ops) { return !(kept_ops & policy_random_ops()); }

static const struct checkpoint_services policy_ignored_services = {.policy_keeps = policy_keeps_everything};
static const struct checkpoint_services stale_cache_services = {.cache_lookup = cache_lookup_previous_call};
static const struct checkpoint_services mutated_saved_output_services = {
    .forward_done = change_last_cached,
    .cache_unchanged = cache_unchanged_unchecked,
};
static const struct checkpoint_services rng_op_saved_without_replay_services = {
    .rng_replay_needed = rng_replay_needed_unless_random_kept,
};

/* Layers per checkpointed segment (segments = every: 1). */
static int segment_size(const struct ckpt_case *c)
{
    return c->segments <= 0 ? 1 : c->layers / c->segments;
}

/* The ops of the model the policy keeps that save something here: dropout
 * with p = 0 returns its input and records no node. */
static unsigned kept_ops(const struct ckpt_case *c)
{
    unsigned keep = policy_of_case(c);
    if (c->dropout == 0)
        keep &= ~POLICY_BIT(POP_DROPOUT);
    return keep;
}

static int policy_ignored_observable(const struct ckpt_case *c, char *why, size_t len)
{
    if (!faulty_has_checkpoints(c, why, len))
        return 0;
    if ((policy_of_case(c) & policy_model_ops(c)) == policy_model_ops(c)) {
        snprintf(why, len, "the policy keeps every op of the model already");
        return 0;
    }
    return 1;
}

static int stale_cache_observable(const struct ckpt_case *c, char *why, size_t len)
{
    if (!faulty_has_checkpoints(c, why, len))
        return 0;
    unsigned keep = kept_ops(c);
    if (c->dropout == 0)
        keep &= ~policy_random_ops() | POLICY_BIT(POP_RRELU); /* masks of ones: every call's is the same */
    for (int op = 0; op < POP_COUNT; op++)
        if ((keep & POLICY_BIT(op)) && policy_calls_per_layer(c, (enum policy_op)op) * segment_size(c) >= 2)
            return 1;
    snprintf(why, len, "no op the policy keeps runs twice in one checkpointed segment: there is no other "
                       "invocation to mistake");
    return 0;
}

static int mutated_saved_output_observable(const struct ckpt_case *c, char *why, size_t len)
{
    if (!faulty_has_checkpoints(c, why, len))
        return 0;
    if (!kept_ops(c)) {
        snprintf(why, len, "the policy keeps nothing in this model: no cached tensor to change");
        return 0;
    }
    return 1;
}

static int rng_op_saved_observable(const struct ckpt_case *c, char *why, size_t len)
{
    if (!faulty_replays_rng(c, why, len))
        return 0;
    unsigned keep = kept_ops(c), ops = policy_model_ops(c);
    if (!(keep & policy_random_ops())) {
        snprintf(why, len, "the policy keeps no random op's saved tensors: the recompute replays RNG");
        return 0;
    }
    /* A recomputed saved tensor that comes after a random op in the same
     * segment: within a layer (gpt_block: ln2, fc, bias-GELU after the
     * first dropout; rrelu_mlp: an rrelu not kept), or in a later layer. */
    unsigned after_random_in_layer = 0;
    if (c->model == MODEL_GPT_BLOCK)
        after_random_in_layer = ops & (POLICY_BIT(POP_LAYER_NORM) | POLICY_BIT(POP_LINEAR) |
                                       POLICY_BIT(POP_GELU_TANH) | POLICY_BIT(POP_BIAS_GELU_FUSED) |
                                       POLICY_BIT(POP_BIAS_GELU_FUSED_ATOMIC));
    else if (c->model == MODEL_RRELU_MLP)
        after_random_in_layer = POLICY_BIT(POP_RRELU);
    if ((after_random_in_layer & ~keep) || (segment_size(c) >= 2 && (ops & ~keep)))
        return 1;
    snprintf(why, len, "nothing recomputed comes after a random op inside a segment");
    return 0;
}

const struct checkpoint_impl impl_policy_ignored = {
    .name = "policy_ignored",
    .summary = "planted bug: selective, every saved tensor cached whatever the policy (no memory saved)",
    .run = impl_run_selective,
    .services = &policy_ignored_services,
    .observable = policy_ignored_observable,
};

const struct checkpoint_impl impl_stale_cache = {
    .name = "stale_cache",
    .summary = "planted bug: selective, cache looked up at the previous invocation of the same op",
    .run = impl_run_selective,
    .services = &stale_cache_services,
    .observable = stale_cache_observable,
};

const struct checkpoint_impl impl_mutated_saved_output = {
    .name = "mutated_saved_output",
    .summary = "planted bug: selective, a cached tensor changed in place after forward, version not checked",
    .run = impl_run_selective,
    .services = &mutated_saved_output_services,
    .observable = mutated_saved_output_observable,
};

const struct checkpoint_impl impl_rng_op_saved_without_replay = {
    .name = "rng_op_saved_without_replay",
    .summary = "planted bug: selective, no RNG replay when random ops are cached; later ops redraw",
    .run = impl_run_selective,
    .services = &rng_op_saved_without_replay_services,
    .observable = rng_op_saved_observable,
};

static const struct checkpoint_services attention_swapped_services = {.policy_keeps = policy_keeps_swapped};

/* It shows where a checkpointed gpt block's policy keeps one of the two
 * and not the other. */
static int attention_swapped_observable(const struct ckpt_case *c, char *why, size_t len)
{
    if (!faulty_has_checkpoints(c, why, len))
        return 0;
    unsigned keep = policy_of_case(c);
    int attention = (keep & POLICY_BIT(POP_CAUSAL_ATTENTION)) != 0, bda = (keep & POLICY_BIT(POP_BIAS_DROPOUT_ADD)) != 0;
    if (c->model != MODEL_GPT_BLOCK || attention == bda) {
        snprintf(why, len, "the policy keeps both or neither of the attention and the block's dropout");
        return 0;
    }
    return 1;
}

const struct checkpoint_impl impl_attention_swapped_for_dropout = {
    .name = "attention_swapped_for_dropout",
    .summary = "planted bug: selective, the policy lookup swaps the attention and the block's dropout",
    .run = impl_run_selective,
    .services = &attention_swapped_services,
    .observable = attention_swapped_observable,
};
