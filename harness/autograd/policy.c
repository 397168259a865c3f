#include "policy.h"

#include <stdio.h>
#include <string.h>

#include "error.h"

static const char *const op_names[POP_COUNT] = {
    [POP_LINEAR] = "linear",
    [POP_CAUSAL_ATTENTION] = "causal_attention",
    [POP_LAYER_NORM] = "layer_norm",
    [POP_GELU] = "gelu",
    [POP_GELU_TANH] = "gelu_tanh",
    [POP_BIAS_GELU_FUSED] = "bias_gelu_fused",
    [POP_BIAS_GELU_FUSED_ATOMIC] = "bias_gelu_fused_atomic",
    [POP_DROPOUT] = "dropout",
    [POP_BIAS_DROPOUT_ADD] = "bias_dropout_add",
    [POP_RRELU] = "rrelu",
    [POP_BATCH_NORM] = "batch_norm",
};

/* The impls that run with the case's policy (impls/selective.c and its
 * planted bugs; tests/test_selective.c checks this list against the
 * registry, which this torch-free module cannot see). */
static const char *const policy_impls[] = {"selective", "policy_ignored", "stale_cache", "mutated_saved_output",
                                           "rng_op_saved_without_replay", NULL};

const char *policy_op_name(enum policy_op op)
{
    return op >= 0 && op < POP_COUNT ? op_names[op] : "?";
}

int policy_op_from_name(const char *name)
{
    for (int i = 0; i < POP_COUNT; i++)
        if (name && strcmp(op_names[i], name) == 0)
            return i;
    return -1;
}

int policy_keeps(unsigned keep, const char *name)
{
    int op = policy_op_from_name(name);
    return op >= 0 && (keep & POLICY_BIT(op));
}

unsigned policy_random_ops(void)
{
    return POLICY_BIT(POP_DROPOUT) | POLICY_BIT(POP_BIAS_DROPOUT_ADD) | POLICY_BIT(POP_RRELU);
}

static enum policy_op bias_gelu_op(const struct ckpt_case *c)
{
    switch (c->fusion) {
    case FUSION_BIAS_GELU: return POP_BIAS_GELU_FUSED;
    case FUSION_BIAS_GELU_ATOMIC: return POP_BIAS_GELU_FUSED_ATOMIC;
    default: return POP_GELU_TANH;
    }
}

int policy_calls_per_layer(const struct ckpt_case *c, enum policy_op op)
{
    switch (c->model) {
    case MODEL_MLP:
    case MODEL_TWO_STREAM: /* its second gelu runs under no_grad and saves nothing */
        return op == POP_LINEAR || op == POP_DROPOUT || op == bias_gelu_op(c);
    case MODEL_RRELU_MLP:
        return op == POP_LINEAR || op == POP_RRELU || op == POP_DROPOUT;
    case MODEL_BN_MLP:
        return op == POP_LINEAR || op == POP_BATCH_NORM || op == POP_GELU_TANH || op == POP_DROPOUT;
    case MODEL_SCALED_MLP: /* quantize saves nothing: no policy op */
        return op == POP_LINEAR || op == POP_GELU_TANH || op == POP_DROPOUT;
    case MODEL_BRANCHY:
        return op == POP_LINEAR ? 2 : op == POP_GELU_TANH || op == POP_DROPOUT;
    case MODEL_GPT_BLOCK:
        if (op == POP_LINEAR)
            return 4;
        if (op == POP_LAYER_NORM || op == POP_BIAS_DROPOUT_ADD)
            return 2;
        return op == POP_CAUSAL_ATTENTION || op == bias_gelu_op(c);
    }
    return 0;
}

unsigned policy_model_ops(const struct ckpt_case *c)
{
    unsigned ops = 0;
    for (int op = 0; op < POP_COUNT; op++)
        if (policy_calls_per_layer(c, (enum policy_op)op) > 0)
            ops |= POLICY_BIT(op);
    return ops;
}

static void list_ops(unsigned ops, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int op = 0; op < POP_COUNT && used < len; op++) {
        if (!(ops & POLICY_BIT(op)))
            continue;
        int n = snprintf(buf + used, len - used, "%s%s", used ? ", " : "", op_names[op]);
        if (n < 0)
            break;
        used += (size_t)n;
    }
}

int policy_parse(const char *text, unsigned *keep, char *why, size_t len)
{
    *keep = 0;
    if (strcmp(text, "save_matmuls") == 0) {
        *keep = POLICY_BIT(POP_LINEAR) | POLICY_BIT(POP_CAUSAL_ATTENTION);
        return ST_OK;
    }
    if (strcmp(text, "attention_core") == 0) {
        *keep = POLICY_ALL & ~POLICY_BIT(POP_CAUSAL_ATTENTION);
        return ST_OK;
    }
    if (strncmp(text, "save:", 5) != 0) {
        snprintf(why, len, "expected save_matmuls, attention_core or save:op,op,...");
        return ST_INPUT;
    }
    const char *p = text + 5;
    for (;;) {
        const char *end = p + strcspn(p, ",");
        char name[48];
        while (p < end && *p == ' ')
            p++;
        size_t n = (size_t)(end - p);
        while (n > 0 && p[n - 1] == ' ')
            n--;
        if (n == 0 || n >= sizeof name) {
            snprintf(why, len, "an empty or overlong op name in '%s'", text);
            return ST_INPUT;
        }
        memcpy(name, p, n);
        name[n] = '\0';
        int op = policy_op_from_name(name);
        if (op < 0) {
            char all[256];
            list_ops(POLICY_ALL, all, sizeof all);
            snprintf(why, len, "unknown op '%s' (ops: %s)", name, all);
            return ST_INPUT;
        }
        if (*keep & POLICY_BIT(op)) {
            snprintf(why, len, "op '%s' named twice", name);
            return ST_INPUT;
        }
        *keep |= POLICY_BIT(op);
        if (!*end)
            return ST_OK;
        p = end + 1;
    }
}

unsigned policy_of_case(const struct ckpt_case *c)
{
    unsigned keep;
    char why[8];
    if (!c->policy[0] || policy_parse(c->policy, &keep, why, sizeof why))
        return 0;
    return keep & policy_model_ops(c);
}

int policy_impl_uses_policy(const char *impl)
{
    for (int i = 0; policy_impls[i]; i++)
        if (strcmp(policy_impls[i], impl) == 0)
            return 1;
    return 0;
}


int policy_check_case(const struct ckpt_case *c, const char *path, int line)
{
    const char *user = NULL;
    for (int i = 0; i < c->n_impls && !user; i++)
        if (policy_impl_uses_policy(c->impls[i]))
            user = c->impls[i];
    if (!c->policy[0]) {
        if (user)
            return error_set(ST_INPUT, "%s:%d: case '%s': impl '%s' needs a policy (policy = save_matmuls, "
                             "attention_core or save:op,op)", path, line, c->name, user);
        return ST_OK;
    }
    if (!user)
        return error_set(ST_INPUT, "%s:%d: case '%s': policy applies to selective checkpointing only, and none "
                         "of its impls is selective (reentrant and nonreentrant recompute every op)",
                         path, line, c->name);
    unsigned keep, have = policy_model_ops(c);
    char why[320];
    if (policy_parse(c->policy, &keep, why, sizeof why))
        return error_set(ST_INPUT, "%s:%d: case '%s': policy '%s': %s", path, line, c->name, c->policy, why);
    char ops[256];
    list_ops(have, ops, sizeof ops);
    if (strcmp(c->policy, "attention_core") == 0 && !(have & POLICY_BIT(POP_CAUSAL_ATTENTION)))
        return error_set(ST_INPUT, "%s:%d: case '%s': policy attention_core recomputes causal_attention, which "
                         "model %s does not have (its ops: %s)", path, line, c->name, case_model_name(c->model), ops);
    if (strncmp(c->policy, "save:", 5) == 0 && (keep & ~have)) {
        list_ops(keep & ~have, why, sizeof why);
        return error_set(ST_INPUT, "%s:%d: case '%s': policy names %s, which model %s (fusion as set) does not "
                         "run (its ops: %s)", path, line, c->name, why, case_model_name(c->model), ops);
    }
    return ST_OK;
}
