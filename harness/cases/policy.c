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
                                           "rng_op_saved_without_replay", "attention_swapped_for_dropout", NULL};

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

void policy_list_ops(unsigned ops, char *buf, size_t len)
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
            policy_list_ops(POLICY_ALL, all, sizeof all);
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

int policy_impl_uses_policy(const char *impl)
{
    for (int i = 0; policy_impls[i]; i++)
        if (strcmp(policy_impls[i], impl) == 0)
            return 1;
    return 0;
}
