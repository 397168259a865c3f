#include "policy_statement.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "policy.h"

/* Megatron-LM's selective recompute saves what the matmuls produce: each
 * linear layer's and the attention's (QKᵀ and the product with V). */
static const char *const save_matmuls_ops[] = {"linear", "causal_attention", NULL};
/* Korthikanti et al. §5: recompute only the attention core (QKᵀ, softmax,
 * softmax dropout, ·V); every other op keeps what it saves. */
static const char *const attention_core_recomputes[] = {"causal_attention", NULL};
/* Every op a policy may name, by the tape's node names. */
static const char *const all_ops[] = {"linear",         "causal_attention",       "layer_norm", "gelu",
                                      "gelu_tanh",      "bias_gelu_fused",        "bias_gelu_fused_atomic",
                                      "dropout",        "bias_dropout_add",       "rrelu",      "batch_norm",
                                      NULL};

static int named_in(const char *const *list, const char *name)
{
    for (int i = 0; list[i]; i++)
        if (strcmp(list[i], name) == 0)
            return 1;
    return 0;
}

static unsigned bit_of(const char *name)
{
    int op = policy_op_from_name(name);
    return op < 0 ? 0 : POLICY_BIT(op);
}

int policy_statement_ops(const char *policy, unsigned *keep, char *why, size_t len)
{
    *keep = 0;
    if (strcmp(policy, "save_matmuls") == 0) {
        for (int i = 0; save_matmuls_ops[i]; i++)
            *keep |= bit_of(save_matmuls_ops[i]);
        return ST_OK;
    }
    if (strcmp(policy, "attention_core") == 0) {
        for (int i = 0; all_ops[i]; i++)
            if (!named_in(attention_core_recomputes, all_ops[i]))
                *keep |= bit_of(all_ops[i]);
        return ST_OK;
    }
    if (strncmp(policy, "save:", 5) == 0) {
        char copy[256], *save = NULL;
        snprintf(copy, sizeof copy, "%s", policy + 5);
        for (char *tok = strtok_r(copy, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
            if (!named_in(all_ops, tok)) {
                snprintf(why, len, "policy '%s' names '%s', no op the statement knows", policy, tok);
                return ST_INPUT;
            }
            *keep |= bit_of(tok);
        }
        return ST_OK;
    }
    snprintf(why, len, "policy '%s' is none the statement covers", policy);
    return ST_INPUT;
}

/* Korthikanti's Table (per layer, 16-bit, s·b·h units) next to the
 * harness's block in d-byte elements (docs/memory.md): */
struct gpt_dims {
    double sbh, sb, as2b, d;
};

/* linear: the inputs of QKV (Korthikanti 2sbh), of the attention's output
 * projection (2sbh), of fc (2sbh) and of the MLP's projection (8sbh). */
static double linear_bytes(const struct gpt_dims *g) { return (1 + 1 + 1 + 4) * g->sbh * g->d; }
/* causal_attention: Q and K (4sbh) and V (2sbh) — contiguous copies — and
 * the softmax output (2as²b); the block has no attention dropout, so
 * Korthikanti's mask (as²b) and dropout output (2as²b) are absent. */
static double attention_bytes(const struct gpt_dims *g) { return (3 * g->sbh + g->as2b) * g->d; }
/* layer_norm: the input of the second norm, x1 (2sbh), and mean and rstd
 * of both (b·s each, not in Korthikanti). The first norm's input is the
 * layer's: counted where nobody else holds it (input_held). */
static double layer_norm_bytes(const struct gpt_dims *g, int input_held)
{
    return (g->sbh + 4 * g->sb + (input_held ? 0 : g->sbh)) * g->d;
}
/* bias-GELU, fused or not: its 4h-wide input (8sbh). */
static double bias_gelu_bytes(const struct gpt_dims *g) { return 4 * g->sbh * g->d; }
/* bias_dropout_add, twice: a mask each (Korthikanti: sbh at one byte),
 * here in the activation dtype; a one-element tensor when p = 0. */
static double bias_dropout_add_bytes(const struct gpt_dims *g, double p)
{
    return 2 * (p > 0 ? g->sbh : 1) * g->d;
}

/* The op the block's bias-GELU runs as, by the case's fusion. */
static const char *bias_gelu_op(const struct ckpt_case *c)
{
    return c->fusion == FUSION_BIAS_GELU ? "bias_gelu_fused"
           : c->fusion == FUSION_BIAS_GELU_ATOMIC ? "bias_gelu_fused_atomic" : "gelu_tanh";
}

/* checkpoint_sequential's plan: `segments` runs of layers / segments
 * layers each (every layer its own for 0), the last one plain. */
static int checkpointed_layers(const struct ckpt_case *c, int *size)
{
    if (c->segments == 0) {
        *size = 1;
        return c->layers;
    }
    int n = c->segments > c->layers ? c->layers : c->segments;
    *size = c->layers / n;
    return *size * (n - 1);
}

int policy_statement_gpt_extra_bytes(const struct ckpt_case *c, unsigned keep, double *bytes, char *why, size_t len)
{
    *bytes = 0;
    if (c->model != MODEL_GPT_BLOCK) {
        snprintf(why, len, "the bytes are stated for gpt_block only");
        return ST_INPUT;
    }
    if (c->autocast != AUTOCAST_OFF) {
        snprintf(why, len, "the bytes are stated without autocast");
        return ST_INPUT;
    }
    double d = c->dtype == DT_F32 ? 4 : c->dtype == DT_F64 ? 8 : c->dtype == DT_BF16 || c->dtype == DT_F16 ? 2 : 0;
    if (d == 0) {
        snprintf(why, len, "the bytes are stated for float dtypes only");
        return ST_INPUT;
    }
    struct gpt_dims g = {(double)c->seq * c->batch * c->hidden, (double)c->seq * c->batch,
                         (double)c->heads * c->seq * c->seq * c->batch, d};
    int size, n = checkpointed_layers(c, &size);
    for (int i = 0; i < n; i++) {
        int starts_segment = i % size == 0;
        if (keep & bit_of("linear"))
            *bytes += linear_bytes(&g);
        if (keep & bit_of("causal_attention"))
            *bytes += attention_bytes(&g);
        if (keep & bit_of("layer_norm"))
            *bytes += layer_norm_bytes(&g, starts_segment);
        if (keep & bit_of(bias_gelu_op(c)))
            *bytes += bias_gelu_bytes(&g);
        if (keep & bit_of("bias_dropout_add"))
            *bytes += bias_dropout_add_bytes(&g, c->dropout);
    }
    return ST_OK;
}

enum held_outcome policy_statement_check_run(const struct ckpt_case *c, const struct run_record *run, const char *impl,
                                             char *why, size_t len)
{
    why[0] = '\0';
    double packed_attr = run_record_attr(run, "selective.ops_packed");
    double kept_attr = run_record_attr(run, "selective.ops_kept");
    if (isnan(packed_attr) || isnan(kept_attr))
        return HELD_UNJUDGED; /* no checkpoint that packs saved tensors: nothing to state */
    unsigned packed = (unsigned)packed_attr, kept = (unsigned)kept_attr, stated = 0;
    int with_policy = c->policy[0] && policy_impl_uses_policy(impl);
    char text[160];
    if (with_policy && policy_statement_ops(c->policy, &stated, text, sizeof text)) {
        snprintf(why, len, "kept ops not judged: %s", text);
        return HELD_UNJUDGED;
    }
    unsigned expected = stated & packed;
    if (kept != expected) {
        char extra[160], missing[160];
        policy_list_ops(kept & ~expected, extra, sizeof extra);
        policy_list_ops(expected & ~kept, missing, sizeof missing);
        const char *which = with_policy ? "the policy does not name" : "a full recompute keeps none of";
        if (!missing[0])
            snprintf(why, len, "%s kept from forward the saved tensors of [%s], which %s", run->name, extra, which);
        else if (!extra[0])
            snprintf(why, len, "%s recomputed the saved tensors of [%s], which the policy names and keeps", run->name,
                     missing);
        else
            snprintf(why, len, "%s kept from forward the saved tensors of [%s], which %s, and recomputed those of "
                               "[%s], which it names",
                     run->name, extra, which, missing);
        if (with_policy) {
            size_t used = strlen(why);
            snprintf(why + used, len - used, " (policy '%s')", c->policy);
        }
        return HELD_OFF;
    }
    double extra_bytes;
    if (!with_policy || policy_statement_gpt_extra_bytes(c, expected, &extra_bytes, text, sizeof text))
        return HELD_MATCHES;
    double full = run_record_attr(run, "memory.predicted_checkpointed_end_forward_bytes");
    double held = run_record_attr(run, "memory.end_forward_bytes");
    if (isnan(full) || isnan(held))
        return HELD_MATCHES;
    double stated_held = full + extra_bytes, tolerance = held_tolerance_bytes(c->device, stated_held);
    if (fabs(held - stated_held) <= tolerance)
        return HELD_MATCHES;
    snprintf(why, len,
             "%s holds %.0f bytes at the end of forward; policy '%s' states %.0f (a full recompute's %.0f and %.0f "
             "kept by its ops, Korthikanti's per-op bytes): %+.0f bytes, beyond the tolerance of %.0f",
             run->name, held, c->policy, stated_held, full, extra_bytes, held - stated_held, tolerance);
    return HELD_OFF;
}
