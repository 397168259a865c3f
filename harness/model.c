#include "model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "ops.h"

#define LAYER_NORM_EPS 1e-5
#define BIAS_INIT_STD 0.1
/* RReLU's default slope range in PyTorch: [1/8, 1/3]. */
#define RRELU_LOWER (1.0 / 8.0)
#define RRELU_UPPER (1.0 / 3.0)

static int add_param(struct model *m, int layer, const char *name, int64_t d0, int64_t d1, double init_std)
{
    struct model_param *p = &m->params[m->n_params++];
    snprintf(p->name, sizeof p->name, "%s", name);
    p->layer = layer;
    p->ndim = d1 ? 2 : 1;
    p->shape[0] = d0;
    p->shape[1] = d1;
    p->init_std = init_std;
    return ST_OK;
}

/* Adds "<prefix>weight" [out, in] and, when with_bias, "<prefix>bias" [out]. */
static void add_linear(struct model *m, int layer, const char *prefix, int64_t out, int64_t in)
{
    char name[MODEL_PARAM_NAME_MAX];
    snprintf(name, sizeof name, "%sweight", prefix);
    add_param(m, layer, name, out, in, 1.0 / sqrt((double)in));
    snprintf(name, sizeof name, "%sbias", prefix);
    add_param(m, layer, name, out, 0, BIAS_INIT_STD);
}

static void add_norm(struct model *m, int layer, const char *prefix)
{
    char name[MODEL_PARAM_NAME_MAX];
    snprintf(name, sizeof name, "%sweight", prefix);
    add_param(m, layer, name, m->hidden, 0, 0.0);
    snprintf(name, sizeof name, "%sbias", prefix);
    add_param(m, layer, name, m->hidden, 0, -1.0);
}

static int params_per_layer(enum model_kind kind)
{
    switch (kind) {
    case MODEL_GPT_BLOCK: return 12;
    case MODEL_BRANCHY: return 4;
    default: return 2;
    }
}

int model_create(struct model *m, const struct ckpt_case *c, int device)
{
    memset(m, 0, sizeof *m);
    m->kind = c->model;
    m->layers = c->layers;
    m->hidden = c->hidden;
    m->seq = c->seq;
    m->batch = c->batch;
    m->heads = c->heads;
    m->dropout = c->dropout;
    m->fusion = c->fusion;
    m->dtype = (enum dtype)c->dtype;
    m->device = device;
    m->params = calloc((size_t)(c->layers * params_per_layer(c->model)), sizeof *m->params);
    if (!m->params)
        return error_set(ST_RUN, "out of memory laying out the model");
    int64_t h = m->hidden;
    char prefix[32];
    for (int i = 0; i < m->layers; i++) {
        switch (m->kind) {
        case MODEL_MLP:
        case MODEL_RRELU_MLP:
            snprintf(prefix, sizeof prefix, "l%d.", i);
            add_linear(m, i, prefix, h, h);
            break;
        case MODEL_BRANCHY:
            snprintf(prefix, sizeof prefix, "b%d.a.", i);
            add_linear(m, i, prefix, h, h);
            snprintf(prefix, sizeof prefix, "b%d.b.", i);
            add_linear(m, i, prefix, h, h);
            break;
        case MODEL_GPT_BLOCK:
            snprintf(prefix, sizeof prefix, "h%d.ln1.", i);
            add_norm(m, i, prefix);
            snprintf(prefix, sizeof prefix, "h%d.attn.qkv.", i);
            add_linear(m, i, prefix, 3 * h, h);
            snprintf(prefix, sizeof prefix, "h%d.attn.proj.", i);
            add_linear(m, i, prefix, h, h);
            snprintf(prefix, sizeof prefix, "h%d.ln2.", i);
            add_norm(m, i, prefix);
            snprintf(prefix, sizeof prefix, "h%d.mlp.fc.", i);
            add_linear(m, i, prefix, 4 * h, h);
            snprintf(prefix, sizeof prefix, "h%d.mlp.proj.", i);
            add_linear(m, i, prefix, h, 4 * h);
            break;
        }
    }
    return ST_OK;
}

void model_free(struct model *m)
{
    free(m->params);
    m->params = NULL;
    m->n_params = 0;
}

void model_input_shape(const struct model *m, int64_t shape[3])
{
    shape[0] = m->batch;
    shape[1] = m->seq;
    shape[2] = m->hidden;
}

/* The layer's k-th parameter. */
static struct var *layer_param(const struct model *m, int layer, int k)
{
    return m->params[layer * params_per_layer(m->kind) + k].var;
}

/* bias+GELU(tanh) on a bias-free linear output, as the case's fusion says. */
static int bias_gelu(const struct model *m, struct var *y, struct var *b, struct var **out)
{
    switch (m->fusion) {
    case FUSION_BIAS_GELU: return op_bias_gelu_fused(out, y, b, FUSED_DETERMINISTIC);
    case FUSION_BIAS_GELU_ATOMIC: return op_bias_gelu_fused(out, y, b, FUSED_ATOMIC);
    default: return op_bias_gelu_unfused(out, y, b);
    }
}

/* Releases its first argument and returns the status, so forward chains
 * read as a sequence of steps. */
static int step_done(struct var *drop, int st)
{
    var_release(drop);
    return st;
}

/* linear → bias-GELU (per fusion) → dropout; the contract of DESIGN.md. */
static int mlp_layer(const struct model *m, int i, struct var *x, struct var **out)
{
    struct var *w = layer_param(m, i, 0), *b = layer_param(m, i, 1), *y, *h;
    int st;
    if (m->fusion == FUSION_NONE) {
        if ((st = op_linear(&y, x, w, b)))
            return st;
        if ((st = step_done(y, op_gelu(&h, y, 1))))
            return st;
    } else {
        if ((st = op_linear(&y, x, w, NULL)))
            return st;
        if ((st = step_done(y, bias_gelu(m, y, b, &h))))
            return st;
    }
    return step_done(h, op_dropout(out, h, m->dropout));
}

/* linear → RReLU (training, random slopes) → dropout. */
static int rrelu_layer(const struct model *m, int i, struct var *x, struct var **out)
{
    struct var *y, *h;
    int st;
    if ((st = op_linear(&y, x, layer_param(m, i, 0), layer_param(m, i, 1))))
        return st;
    if ((st = step_done(y, op_rrelu(&h, y, RRELU_LOWER, RRELU_UPPER))))
        return st;
    return step_done(h, op_dropout(out, h, m->dropout));
}

/* x feeds three consumers: gelu(linear_a(x)) + linear_b(x) + x, then
 * dropout. The three gradients meeting at x expose accumulation order. */
static int branchy_layer(const struct model *m, int i, struct var *x, struct var **out)
{
    struct var *a, *ga, *b, *s1, *s2;
    int st;
    if ((st = op_linear(&a, x, layer_param(m, i, 0), layer_param(m, i, 1))))
        return st;
    if ((st = step_done(a, op_gelu(&ga, a, 1))))
        return st;
    if ((st = op_linear(&b, x, layer_param(m, i, 2), layer_param(m, i, 3)))) {
        var_release(ga);
        return st;
    }
    st = op_add(&s1, ga, b);
    var_release(ga);
    var_release(b);
    if (st)
        return st;
    if ((st = step_done(s1, op_add(&s2, s1, x))))
        return st;
    return step_done(s2, op_dropout(out, s2, m->dropout));
}

/* Pre-norm transformer block:
 *   x1 = x + dropout(attn(ln1(x))·Wprojᵀ + bproj)        (bias_dropout_add)
 *   x2 = x1 + dropout(bias_gelu(ln2(x1)·Wfcᵀ, bfc)·W2ᵀ + b2) */
static int gpt_layer(const struct model *m, int i, struct var *x, struct var **out)
{
    struct var *P[12];
    for (int k = 0; k < 12; k++)
        P[k] = layer_param(m, i, k);
    struct var *a, *qkv, *att, *pr, *x1, *a2, *f, *g, *h;
    int st;
    if ((st = op_layer_norm(&a, x, P[0], P[1], LAYER_NORM_EPS)))
        return st;
    if ((st = step_done(a, op_linear(&qkv, a, P[2], P[3]))))
        return st;
    if ((st = step_done(qkv, op_causal_attention(&att, qkv, m->heads))))
        return st;
    if ((st = step_done(att, op_linear(&pr, att, P[4], NULL))))
        return st;
    if ((st = step_done(pr, op_bias_dropout_add(&x1, pr, P[5], x, m->dropout))))
        return st;
    if ((st = op_layer_norm(&a2, x1, P[6], P[7], LAYER_NORM_EPS)))
        return step_done(x1, st);
    if ((st = step_done(a2, op_linear(&f, a2, P[8], NULL))))
        return step_done(x1, st);
    if ((st = step_done(f, bias_gelu(m, f, P[9], &g))))
        return step_done(x1, st);
    if ((st = step_done(g, op_linear(&h, g, P[10], NULL))))
        return step_done(x1, st);
    st = op_bias_dropout_add(out, h, P[11], x1, m->dropout);
    var_release(h);
    return step_done(x1, st);
}

int model_layer_forward(const struct model *m, int layer, struct var *x, struct var **out)
{
    if (layer < 0 || layer >= m->layers)
        return error_set(ST_INTERNAL, "layer %d out of range", layer);
    switch (m->kind) {
    case MODEL_MLP: return mlp_layer(m, layer, x, out);
    case MODEL_RRELU_MLP: return rrelu_layer(m, layer, x, out);
    case MODEL_BRANCHY: return branchy_layer(m, layer, x, out);
    case MODEL_GPT_BLOCK: return gpt_layer(m, layer, x, out);
    }
    return error_set(ST_INTERNAL, "unknown model kind %d", m->kind);
}

int model_layers_forward(const struct model *m, int begin, int end, struct var *x, struct var **out)
{
    struct var *cur = var_retain(x);
    for (int i = begin; i < end; i++) {
        struct var *next;
        int st = model_layer_forward(m, i, cur, &next);
        var_release(cur);
        if (st)
            return st;
        cur = next;
    }
    *out = cur;
    return ST_OK;
}

int model_loss(const struct model *m, struct var *x, struct var *target, struct var **loss)
{
    (void)m;
    return op_mse_loss(loss, x, target);
}

int model_describe(const struct model *m, char *buf, size_t len)
{
    static const char *const fusion_text[] = {"add + gelu_tanh (ATen)", "fused_bias_gelu_tanh",
                                              "fused_bias_gelu_tanh (atomic dbias)"};
    size_t off = 0;
    for (int i = 0; i < m->layers && off < len; i++) {
        int n;
        switch (m->kind) {
        case MODEL_MLP:
            n = snprintf(buf + off, len - off,
                         "layer %d: x = dropout(%s(x·l%d.weightᵀ, l%d.bias), p=%g)\n", i,
                         fusion_text[m->fusion], i, i, m->dropout);
            break;
        case MODEL_RRELU_MLP:
            n = snprintf(buf + off, len - off,
                         "layer %d: x = dropout(rrelu(x·l%d.weightᵀ + l%d.bias, 1/8, 1/3, training), p=%g)\n",
                         i, i, i, m->dropout);
            break;
        case MODEL_BRANCHY:
            n = snprintf(buf + off, len - off,
                         "layer %d: x = dropout(gelu_tanh(x·b%d.a.weightᵀ + b%d.a.bias) + (x·b%d.b.weightᵀ + "
                         "b%d.b.bias) + x, p=%g)\n",
                         i, i, i, i, i, m->dropout);
            break;
        default:
            n = snprintf(buf + off, len - off,
                         "layer %d: x1 = x + dropout(attn_causal(ln1(x)·h%d.attn.qkv.weightᵀ + qkv.bias, heads=%d)"
                         "·h%d.attn.proj.weightᵀ + proj.bias, p=%g); x = x1 + dropout(%s(ln2(x1)·h%d.mlp.fc.weightᵀ, "
                         "fc.bias)·h%d.mlp.proj.weightᵀ + mlp.proj.bias, p=%g); layer_norm eps=1e-5\n",
                         i, i, m->heads, i, m->dropout, fusion_text[m->fusion], i, i, m->dropout);
            break;
        }
        if (n < 0)
            break;
        off += (size_t)n;
    }
    if (off < len)
        off += (size_t)snprintf(buf + off, len - off, "loss = mean((x - target)^2)\n");
    return ST_OK;
}
