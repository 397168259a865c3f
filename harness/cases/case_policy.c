#include "case_policy.h"

#include <stdio.h>
#include <string.h>

#include "error.h"

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

unsigned policy_of_case(const struct ckpt_case *c)
{
    unsigned keep;
    char why[8];
    if (!c->policy[0] || policy_parse(c->policy, &keep, why, sizeof why))
        return 0;
    return keep & policy_model_ops(c);
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
    policy_list_ops(have, ops, sizeof ops);
    if (strcmp(c->policy, "attention_core") == 0 && !(have & POLICY_BIT(POP_CAUSAL_ATTENTION)))
        return error_set(ST_INPUT, "%s:%d: case '%s': policy attention_core recomputes causal_attention, which "
                         "model %s does not have (its ops: %s)", path, line, c->name, case_model_name(c->model), ops);
    if (strncmp(c->policy, "save:", 5) == 0 && (keep & ~have)) {
        policy_list_ops(keep & ~have, why, sizeof why);
        return error_set(ST_INPUT, "%s:%d: case '%s': policy names %s, which model %s (fusion as set) does not "
                         "run (its ops: %s)", path, line, c->name, why, case_model_name(c->model), ops);
    }
    return ST_OK;
}
