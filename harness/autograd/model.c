#include "model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aten/aten.h"
#include "error.h"
#include "ops.h"
#include "policy.h"

#define LAYER_NORM_EPS 1e-5
/* nn.BatchNorm1d's defaults. */
#define BATCH_NORM_EPS 1e-5
#define BATCH_NORM_MOMENTUM 0.1
/* scaled_mlp: FP8 E4M3's largest finite value, and the amax history length
 * of a delayed-scaling recipe (short, so that a step's amax can leave it). */
#define FP8_E4M3_MAX 448.0
#define AMAX_HISTORY_LEN 4
#define BIAS_INIT_STD 0.1
/* RReLU's default slope range in PyTorch: [1/8, 1/3]. */
#define RRELU_LOWER (1.0 / 8.0)
#define RRELU_UPPER (1.0 / 3.0)
/* two_stream's residual scale: r' = r + s·h. */
#define TWO_STREAM_SCALE 0.5

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
    case MODEL_BN_MLP: return 4;
    default: return 2;
    }
}

static int buffers_per_layer(enum model_kind kind)
{
    return kind == MODEL_BN_MLP || kind == MODEL_SCALED_MLP ? 2 : 0;
}

static void add_buffer(struct model *m, int layer, const char *name, int64_t size, enum dtype dtype, double init)
{
    struct module_buffer *b = &m->buffers[m->n_buffers++];
    snprintf(b->name, sizeof b->name, "%s", name);
    b->layer = layer;
    b->ndim = 1;
    b->shape[0] = size;
    b->dtype = dtype;
    b->init = init;
}

/* Layer i's buffers: batch norm's running mean (zeros) and variance (ones),
 * in the model's dtype; or the amax history (zeros) and scale (one), in
 * float32 whatever the model computes in, as FP8 recipes keep them. */
static void add_layer_buffers(struct model *m, int i)
{
    char name[MODULE_BUFFER_NAME_MAX];
    if (m->kind == MODEL_BN_MLP) {
        snprintf(name, sizeof name, "l%d.bn.running_mean", i);
        add_buffer(m, i, name, m->hidden, m->dtype, 0.0);
        snprintf(name, sizeof name, "l%d.bn.running_var", i);
        add_buffer(m, i, name, m->hidden, m->dtype, 1.0);
    } else if (m->kind == MODEL_SCALED_MLP) {
        snprintf(name, sizeof name, "l%d.amax_history", i);
        add_buffer(m, i, name, AMAX_HISTORY_LEN, DT_F32, 0.0);
        snprintf(name, sizeof name, "l%d.scale", i);
        add_buffer(m, i, name, 1, DT_F32, 1.0);
    }
}

int model_check_devices(const struct ckpt_case *c)
{
    const char *const keys[2] = {"device", "draw_device"};
    const char *const names[2] = {c->device, c->draw_device};
    for (int i = 0; i < 2; i++) {
        int device;
        if (!names[i][0] || aten_parse_device(names[i], &device) == ST_OK)
            continue;
        char why[256];
        snprintf(why, sizeof why, "%s", error_message());
        return error_set(ST_INPUT, "%s:%d: case %s: %s (%s = %s)", c->file, c->line, c->name, why, keys[i],
                         names[i]);
    }
    return ST_OK;
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
    m->autocast = c->autocast;
    m->device = device;
    m->draw_device = device;
    if (c->draw_device[0]) {
        int st = aten_parse_device(c->draw_device, &m->draw_device);
        if (st)
            return error_wrap(st, "draw_device");
    }
    m->params = calloc((size_t)(c->layers * params_per_layer(c->model)), sizeof *m->params);
    int nb = c->layers * buffers_per_layer(c->model);
    m->buffers = nb ? calloc((size_t)nb, sizeof *m->buffers) : NULL;
    m->state = nb ? calloc(1, sizeof *m->state) : NULL;
    if (!m->params || (nb && (!m->buffers || !m->state))) {
        model_free(m);
        return error_set(ST_RUN, "out of memory laying out the model");
    }
    int64_t h = m->hidden;
    char prefix[32];
    for (int i = 0; i < m->layers; i++) {
        switch (m->kind) {
        case MODEL_MLP:
        case MODEL_RRELU_MLP:
        case MODEL_SCALED_MLP:
        case MODEL_TWO_STREAM:
            snprintf(prefix, sizeof prefix, "l%d.", i);
            add_linear(m, i, prefix, h, h);
            break;
        case MODEL_BN_MLP:
            snprintf(prefix, sizeof prefix, "l%d.", i);
            add_linear(m, i, prefix, h, h);
            snprintf(prefix, sizeof prefix, "l%d.bn.", i);
            add_norm(m, i, prefix);
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
        add_layer_buffers(m, i);
    }
    return ST_OK;
}

void model_free(struct model *m)
{
    free(m->params);
    free(m->buffers);
    if (m->state)
        module_state_free(m->state);
    free(m->state);
    m->state = NULL;
    m->params = NULL;
    m->buffers = NULL;
    m->n_params = m->n_buffers = 0;
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

/* Layer i's k-th buffer as ops read it / update it now (module_state.h). */
static tensor *layer_buffer_read(const struct model *m, int layer, int k)
{
    return module_state_read(m->state, layer * buffers_per_layer(m->kind) + k);
}

static tensor *layer_buffer_write(const struct model *m, int layer, int k)
{
    return module_state_write(m->state, layer * buffers_per_layer(m->kind) + k);
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

/* Dropout on the model's draw device: the activation moves there, the mask
 * is drawn from that device's generator, the result moves back. With
 * draw_device = cuda:0 in a CPU case, a segment that receives only CPU
 * tensors draws on a GPU: the case that an RNG stash of the arguments'
 * devices alone misses. */
static int dropout_on_draw_device(const struct model *m, struct var *h, struct var **out)
{
    if (m->draw_device == m->device)
        return op_dropout(out, h, m->dropout);
    struct var *there, *dropped;
    int st;
    if ((st = op_to_device(&there, h, m->draw_device)))
        return st;
    if ((st = step_done(there, op_dropout(&dropped, there, m->dropout))))
        return st;
    return step_done(dropped, op_to_device(out, dropped, m->device));
}

/* h = bias-GELU(x·Wᵀ, b) of layer i, per fusion. */
static int linear_gelu(const struct model *m, int i, struct var *x, struct var **h)
{
    struct var *w = layer_param(m, i, 0), *b = layer_param(m, i, 1), *y;
    int st;
    if (m->fusion == FUSION_NONE) {
        if ((st = op_linear(&y, x, w, b)))
            return st;
        return step_done(y, op_gelu(h, y, 1));
    }
    if ((st = op_linear(&y, x, w, NULL)))
        return st;
    return step_done(y, bias_gelu(m, y, b, h));
}

/* linear → bias-GELU (per fusion) → dropout; the contract of DESIGN.md. */
static int mlp_layer(const struct model *m, int i, struct var *x, struct var **out)
{
    struct var *h;
    int st = linear_gelu(m, i, x, &h);
    if (st)
        return st;
    return step_done(h, dropout_on_draw_device(m, h, out));
}

/* two_stream, (x, r, c) -> (x', r', c') with s the non-tensor argument:
 *   h = bias-GELU(x·Wᵀ, b) (as mlp);  r' = r + s·h;  x' = dropout(h + c, p);
 *   c' = gelu_tanh(r') under no_grad: a constant, the detached output. */
static int two_stream_layer(const struct model *m, int i, struct var *const *in, double s, struct var **out)
{
    struct var *h = NULL, *sh = NULL, *hc = NULL;
    int st = linear_gelu(m, i, in[0], &h);
    if (!st)
        st = op_scale(&sh, h, s);
    if (!st)
        st = op_add(&out[1], in[1], sh);
    if (!st)
        st = op_add(&hc, h, in[2]);
    if (!st)
        st = op_dropout(&out[0], hc, m->dropout);
    if (!st) {
        int grad = grad_mode_set(0);
        st = op_gelu(&out[2], out[1], 1);
        grad_mode_set(grad);
    }
    var_release(h);
    var_release(sh);
    var_release(hc);
    if (st)
        for (int k = 0; k < 3; k++) {
            var_release(out[k]);
            out[k] = NULL;
        }
    return st;
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

/* linear → batch norm (training: batch statistics, running statistics
 * updated) → gelu_tanh → dropout. */
static int bn_mlp_layer(const struct model *m, int i, struct var *x, struct var **out)
{
    struct var *y, *z, *h;
    int st;
    if ((st = op_linear(&y, x, layer_param(m, i, 0), layer_param(m, i, 1))))
        return st;
    if ((st = step_done(y, op_batch_norm(&z, y, layer_param(m, i, 2), layer_param(m, i, 3),
                                         layer_buffer_write(m, i, 0), layer_buffer_write(m, i, 1),
                                         BATCH_NORM_MOMENTUM, BATCH_NORM_EPS))))
        return st;
    if ((st = step_done(z, op_gelu(&h, z, 1))))
        return st;
    return step_done(h, op_dropout(out, h, m->dropout));
}

/* The input quantised with the scale the state holds (fake_quantize), then
 * the amax history and scale updated from this input (once per forward:
 * the next forward quantises with the new scale), then linear →
 * gelu_tanh → dropout. */
static int scaled_mlp_layer(const struct model *m, int i, struct var *x, struct var **out)
{
    struct var *q, *y, *h;
    int st;
    if ((st = op_fake_quantize(&q, x, layer_buffer_read(m, i, 1), FP8_E4M3_MAX)))
        return st;
    if ((st = tensor_delayed_scaling_update_(layer_buffer_write(m, i, 0), layer_buffer_write(m, i, 1), x->data,
                                             FP8_E4M3_MAX)))
        return step_done(q, st);
    if ((st = step_done(q, op_linear(&y, q, layer_param(m, i, 0), layer_param(m, i, 1)))))
        return st;
    if ((st = step_done(y, op_gelu(&h, y, 1))))
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
    if (m->n_buffers && (!m->state || !m->state->n))
        return error_set(ST_INTERNAL, "model %s runs without its buffers (module_state_init first)",
                         case_model_name(m->kind));
    switch (m->kind) {
    case MODEL_MLP: return mlp_layer(m, layer, x, out);
    case MODEL_RRELU_MLP: return rrelu_layer(m, layer, x, out);
    case MODEL_BRANCHY: return branchy_layer(m, layer, x, out);
    case MODEL_GPT_BLOCK: return gpt_layer(m, layer, x, out);
    case MODEL_BN_MLP: return bn_mlp_layer(m, layer, x, out);
    case MODEL_SCALED_MLP: return scaled_mlp_layer(m, layer, x, out);
    case MODEL_TWO_STREAM: break;
    }
    return error_set(ST_INTERNAL, "model kind %d has no one-tensor layer", m->kind);
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

int model_streams(const struct model *m) { return m->kind == MODEL_TWO_STREAM ? 3 : 1; }

double model_region_scalar(const struct model *m) { return m->kind == MODEL_TWO_STREAM ? TWO_STREAM_SCALE : 0.0; }

int model_streams_begin(const struct model *m, struct var *x, struct var **streams)
{
    streams[0] = var_retain(x);
    for (int k = 1; k < model_streams(m); k++) {
        tensor *zeros;
        int st = tensor_zeros_like(&zeros, x->data);
        if (!st)
            st = var_constant(&streams[k], zeros);
        if (st) {
            while (k--)
                var_release(streams[k]);
            return st;
        }
    }
    return ST_OK;
}

int model_layers_forward_streams(const struct model *m, int begin, int end, struct var *const *in, double scalar,
                                 struct var **out)
{
    if (m->kind != MODEL_TWO_STREAM)
        return model_layers_forward(m, begin, end, in[0], out);
    struct var *cur[3] = {var_retain(in[0]), var_retain(in[1]), var_retain(in[2])};
    int st = ST_OK;
    for (int i = begin; i < end && !st; i++) {
        struct var *next[3] = {0};
        st = two_stream_layer(m, i, cur, scalar, next);
        for (int k = 0; k < 3; k++) {
            var_release(cur[k]);
            cur[k] = next[k];
        }
    }
    for (int k = 0; k < 3; k++)
        out[k] = cur[k];
    return st;
}

int model_streams_end(const struct model *m, struct var *const *streams, struct var **out)
{
    if (m->kind != MODEL_TWO_STREAM) {
        *out = var_retain(streams[0]);
        return ST_OK;
    }
    return op_add(out, streams[0], streams[1]);
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
                         "layer %d: x = dropout(%s(x·l%d.weightᵀ, l%d.bias), p=%g)%s\n", i,
                         fusion_text[m->fusion], i, i, m->dropout,
                         m->draw_device != m->device ? " (dropout drawn on the draw_device, result moved back)" : "");
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
        case MODEL_BN_MLP:
            n = snprintf(buf + off, len - off,
                         "layer %d: x = dropout(gelu_tanh(batch_norm_train(x·l%d.weightᵀ + l%d.bias over batch·seq, "
                         "l%d.bn.weight, l%d.bn.bias, running l%d.bn.running_mean/var, momentum=0.1, eps=1e-5)), "
                         "p=%g)\n",
                         i, i, i, i, i, i, m->dropout);
            break;
        case MODEL_SCALED_MLP:
            n = snprintf(buf + off, len - off,
                         "layer %d: q = bf16(clamp(x·s, ±448))/s with s = l%d.scale (float32); then l%d.amax_history "
                         "= [max|x|, history[0..2]], s = 448/max(history) if > 0; x = dropout(gelu_tanh(q·l%d.weightᵀ "
                         "+ l%d.bias), p=%g); backward of q: straight-through\n",
                         i, i, i, i, i, m->dropout);
            break;
        case MODEL_TWO_STREAM:
            n = snprintf(buf + off, len - off,
                         "layer %d: h = %s(x·l%d.weightᵀ, l%d.bias); r = r + s·h (s=%g, the region's non-tensor "
                         "argument); x = dropout(h + c, p=%g); c = gelu_tanh(r) under no_grad (a constant)\n",
                         i, fusion_text[m->fusion], i, i, TWO_STREAM_SCALE, m->dropout);
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
    if (off < len && m->kind == MODEL_TWO_STREAM)
        off += (size_t)snprintf(buf + off, len - off, "r = c = zeros before layer 0; loss = mean((x + r - target)^2)\n");
    else if (off < len)
        off += (size_t)snprintf(buf + off, len - off, "loss = mean((x - target)^2)\n");
    return ST_OK;
}

/* ---- checkpoint plans and saved-bytes prediction ------------------------ */

void segment_plan_make(struct segment_plan *p, int layers, int segments)
{
    if (segments == SEGMENTS_NONE || layers < 1) {
        *p = (struct segment_plan){0, 0, 0};
    } else if (segments == 0) {
        *p = (struct segment_plan){1, layers, layers};
    } else {
        int n = segments > layers ? layers : segments;
        int size = layers / n;
        *p = (struct segment_plan){size, n - 1, size * (n - 1)};
    }
}

/* The dtypes an op computes in, after autocast's casts (autocast.h): the
 * autocast dtype for linear and the attention products, float32 for layer
 * norm, softmax and the loss, the inputs' own dtype otherwise. */
struct dtype_rules {
    int autocast;
    enum dtype lower; /* the autocast dtype */
};

static enum dtype rule_lower(const struct dtype_rules *r, enum dtype in)
{
    return r->autocast && in != DT_F64 ? r->lower : in;
}

static enum dtype rule_fp32(const struct dtype_rules *r, enum dtype in)
{
    return r->autocast && in != DT_F64 ? DT_F32 : in;
}

/* ATen's type promotion between two floating dtypes (bf16 + f32 = f32). */
static enum dtype promote(enum dtype a, enum dtype b)
{
    if (a == b)
        return a;
    return a == DT_F64 || b == DT_F64 ? DT_F64 : DT_F32;
}

/* What one layer, run plainly, leaves saved at the end of forward. Its
 * input and output are accounted for by the caller, because whether they
 * are held depends on what runs around the layer. */
struct layer_memory {
    int input_kept;      /* an op of the layer saves the input tensor itself */
    int64_t input_casts; /* bytes of casts of the input that ops save */
    int64_t internal;    /* everything else: intermediates, masks, casts of parameters */
    enum dtype out;      /* the output's dtype */
    /* The same bytes by the op that saves them (selective checkpointing
     * keeps those of the ops its policy names), and the op that saves the
     * input itself. */
    int64_t by_op[POP_COUNT];
    enum policy_op input_op;
};

/* Bytes an op saves besides the layer's input. */
static void saves(struct layer_memory *lm, enum policy_op op, int64_t bytes)
{
    lm->internal += bytes;
    lm->by_op[op] += bytes;
}

/* Bytes of one activation [batch, seq, width] of dtype d. */
static int64_t act_bytes(const struct model *m, int64_t width, enum dtype d)
{
    return (int64_t)m->batch * m->seq * width * (int64_t)dtype_size(d);
}

/* The input of a linear (or of the two linears of a branchy layer, each of
 * which casts it on its own): saved as is, or its autocast cast saved. */
static void linear_input(const struct model *m, const struct dtype_rules *r, enum dtype in, int consumers,
                         struct layer_memory *lm)
{
    enum dtype x = rule_lower(r, in);
    lm->input_op = POP_LINEAR;
    if (x == in) {
        lm->input_kept = 1;
    } else {
        lm->input_casts += consumers * act_bytes(m, m->hidden, x);
        lm->by_op[POP_LINEAR] += consumers * act_bytes(m, m->hidden, x);
    }
}

/* A weight [rows, cols] that autocast casts for a linear: the cast is a new
 * tensor the linear saves (the parameter itself was allocated before the
 * step and is not an activation). No cast, no bytes. The harness casts per
 * op; it has no cast cache. */
static int64_t weight_cast(const struct model *m, const struct dtype_rules *r, int64_t rows, int64_t cols)
{
    enum dtype w = rule_lower(r, m->dtype);
    return w == m->dtype ? 0 : rows * cols * (int64_t)dtype_size(w);
}

/* dropout(h, p) saves its scaled mask (h's shape and dtype) and returns
 * h · mask; h itself is saved by nobody and freed. p = 0 draws nothing,
 * saves nothing and returns h. */
static int64_t dropout_mask(const struct model *m, int64_t width, enum dtype d)
{
    /* A mask drawn on another device (draw_device) is not this device's memory. */
    return m->dropout > 0 && m->draw_device == m->device ? act_bytes(m, width, d) : 0;
}

/* mlp's linear (saves its input and the weight) and bias-GELU, or
 * rrelu_mlp's linear and rrelu (saves its input and its random slopes);
 * returns the dtype of their output. */
static enum dtype linear_activation_memory(const struct model *m, const struct dtype_rules *r, enum dtype in,
                                           struct layer_memory *lm)
{
    int64_t h = m->hidden;
    linear_input(m, r, in, 1, lm);
    saves(lm, POP_LINEAR, weight_cast(m, r, h, h));
    enum policy_op act_op = m->kind == MODEL_RRELU_MLP ? POP_RRELU
                            : m->fusion == FUSION_BIAS_GELU ? POP_BIAS_GELU_FUSED
                            : m->fusion == FUSION_BIAS_GELU_ATOMIC ? POP_BIAS_GELU_FUSED_ATOMIC : POP_GELU_TANH;
    /* linear's output, in the dtype it computed in; under autocast the
     * bias (fusion none) is cast inside the linear and not saved. */
    enum dtype y = rule_lower(r, in);
    /* gelu (unfused: x·Wᵀ + b), the fused kernel (x·Wᵀ) or rrelu saves it. */
    saves(lm, act_op, act_bytes(m, h, y));
    if (m->kind == MODEL_RRELU_MLP)
        saves(lm, act_op, act_bytes(m, h, y)); /* rrelu's slopes */
    else if (m->fusion != FUSION_NONE && m->dtype != y)
        saves(lm, act_op, h * (int64_t)dtype_size(y)); /* the fused kernel saves the bias cast to y's dtype */
    return y;
}

/* mlp, rrelu_mlp: linear -> bias-GELU or rrelu -> dropout (saves its mask). */
static void mlp_memory(const struct model *m, const struct dtype_rules *r, enum dtype in, struct layer_memory *lm)
{
    enum dtype y = linear_activation_memory(m, r, in, lm);
    saves(lm, POP_DROPOUT, dropout_mask(m, m->hidden, y));
    lm->out = y;
}

/* bn_mlp: linear (saves its input) -> batch_norm (saves the linear's
 * output and the batch mean and inverse std, [C] each) -> gelu (saves the
 * normalised output) -> dropout. No autocast (case_check.c refuses it). */
static void bn_mlp_memory(const struct model *m, enum dtype in, struct layer_memory *lm)
{
    int64_t h = m->hidden;
    lm->input_op = POP_LINEAR;
    lm->input_kept = 1;
    saves(lm, POP_BATCH_NORM, act_bytes(m, h, in) + 2 * h * (int64_t)dtype_size(in));
    saves(lm, POP_GELU_TANH, act_bytes(m, h, in));
    saves(lm, POP_DROPOUT, dropout_mask(m, h, in));
    lm->out = in;
}

/* scaled_mlp: fake_quantize saves nothing, so the layer's input is not
 * kept; linear saves the quantised copy; gelu its output; dropout its mask. */
static void scaled_mlp_memory(const struct model *m, enum dtype in, struct layer_memory *lm)
{
    int64_t h = m->hidden;
    lm->input_op = POP_LINEAR;
    saves(lm, POP_LINEAR, act_bytes(m, h, in));
    saves(lm, POP_GELU_TANH, act_bytes(m, h, in));
    saves(lm, POP_DROPOUT, dropout_mask(m, h, in));
    lm->out = in;
}

/* The dtypes of two_stream's r and c streams, layer to layer. */
struct stream_dtypes {
    enum dtype r, c;
};

/* two_stream: mlp's linear and bias-GELU; the scale and the two adds save
 * nothing; dropout saves its mask, in the dtype of h + c; c' is made under
 * no_grad and saves nothing. Advances the stream dtypes past the layer. */
static void two_stream_memory(const struct model *m, const struct dtype_rules *r, enum dtype in,
                              struct stream_dtypes *sd, struct layer_memory *lm)
{
    memset(lm, 0, sizeof *lm);
    enum dtype y = linear_activation_memory(m, r, in, lm);
    enum dtype hc = promote(y, sd->c);
    saves(lm, POP_DROPOUT, dropout_mask(m, m->hidden, hc));
    sd->r = promote(sd->r, y); /* r + s·h: the scale keeps h's dtype */
    sd->c = sd->r;             /* gelu_tanh(r') */
    lm->out = hc;
}

/* branchy: gelu(linear_a(x)) + linear_b(x) + x, then dropout. Both linears
 * save x (or each its own cast of x); gelu saves linear_a's output; the two
 * adds save nothing, so linear_b's output and the sums are freed. */
static void branchy_memory(const struct model *m, const struct dtype_rules *r, enum dtype in,
                           struct layer_memory *lm)
{
    int64_t h = m->hidden;
    linear_input(m, r, in, 2, lm);
    saves(lm, POP_LINEAR, 2 * weight_cast(m, r, h, h));
    enum dtype a = rule_lower(r, in);
    saves(lm, POP_GELU_TANH, act_bytes(m, h, a));
    enum dtype sum = promote(a, in); /* (gelu(a) + b) + x */
    saves(lm, POP_DROPOUT, dropout_mask(m, h, sum));
    lm->out = sum;
}

/* layer_norm saves its input (or its float32 cast under autocast), mean and
 * rstd ([batch, seq, 1] in the input's dtype) and its weight and bias (their
 * float32 casts when the parameters are in a lower dtype). Returns the
 * bytes beyond the saved input; *out = the dtype it computes in. */
static int64_t layer_norm_stats(const struct model *m, const struct dtype_rules *r, enum dtype in, enum dtype *out)
{
    enum dtype x = rule_fp32(r, in);
    int64_t bytes = 2 * act_bytes(m, 1, x);
    enum dtype p = rule_fp32(r, m->dtype);
    if (p != m->dtype)
        bytes += 2 * m->hidden * (int64_t)dtype_size(p);
    *out = x;
    return bytes;
}

/* bias_dropout_add(x, b, residual): saves the mask of (x + b) (a
 * one-element tensor of ones when p = 0); x, x + b and the dropped value
 * are freed. *out = the dtype of the sum. */
static int64_t bias_dropout_add_mask(const struct model *m, enum dtype x, enum dtype *out)
{
    enum dtype sum = promote(x, m->dtype);
    *out = sum;
    return m->dropout > 0 ? act_bytes(m, m->hidden, sum) : (int64_t)dtype_size(sum);
}

/* gpt_block, op by op (model.c gpt_layer). */
static void gpt_memory(const struct model *m, const struct dtype_rules *r, enum dtype in, struct layer_memory *lm)
{
    int64_t c = m->hidden;
    enum dtype ln1, ln2, sum1, sum2;
    /* ln1 saves x or its float32 cast. */
    lm->input_op = POP_LAYER_NORM;
    if (rule_fp32(r, in) == in) {
        lm->input_kept = 1;
    } else {
        lm->input_casts += act_bytes(m, c, rule_fp32(r, in));
        lm->by_op[POP_LAYER_NORM] += act_bytes(m, c, rule_fp32(r, in));
    }
    saves(lm, POP_LAYER_NORM, layer_norm_stats(m, r, in, &ln1));
    /* qkv = linear(ln1 out): saves ln1's output (or its cast, and then the
     * output itself is freed). qkv itself is freed after attention. */
    enum dtype q = rule_lower(r, ln1);
    saves(lm, POP_LINEAR, act_bytes(m, c, q) + weight_cast(m, r, 3 * c, c));
    /* attention saves q, k, v (contiguous copies) and the softmax
     * probabilities [batch, heads, seq, seq] (float32 under autocast). */
    saves(lm, POP_CAUSAL_ATTENTION, 3 * act_bytes(m, c, q));
    saves(lm, POP_CAUSAL_ATTENTION, (int64_t)m->batch * m->heads * m->seq * m->seq * (int64_t)dtype_size(rule_fp32(r, q)));
    /* proj = linear(attention out): saves it. */
    saves(lm, POP_LINEAR, act_bytes(m, c, q) + weight_cast(m, r, c, c));
    /* x1 = x + dropout(proj + b). */
    saves(lm, POP_BIAS_DROPOUT_ADD, bias_dropout_add_mask(m, q, &sum1));
    enum dtype x1 = promote(in, sum1);
    /* ln2 saves x1 (or its float32 cast; x1 is then freed with the block). */
    saves(lm, POP_LAYER_NORM, act_bytes(m, c, rule_fp32(r, x1)));
    saves(lm, POP_LAYER_NORM, layer_norm_stats(m, r, x1, &ln2));
    /* fc = linear(ln2 out) [.., 4c]: saves ln2's output or its cast. */
    enum dtype f = rule_lower(r, ln2);
    saves(lm, POP_LINEAR, act_bytes(m, c, f) + weight_cast(m, r, 4 * c, c));
    enum dtype g;
    if (m->fusion == FUSION_NONE) {
        /* add then gelu: gelu saves f + b; f is freed. */
        g = promote(f, m->dtype);
        saves(lm, POP_GELU_TANH, act_bytes(m, 4 * c, g));
    } else {
        /* the fused kernel saves f and the bias (cast to f's dtype if needed). */
        enum policy_op op = m->fusion == FUSION_BIAS_GELU ? POP_BIAS_GELU_FUSED : POP_BIAS_GELU_FUSED_ATOMIC;
        g = f;
        saves(lm, op, act_bytes(m, 4 * c, f));
        if (m->dtype != f)
            saves(lm, op, 4 * c * (int64_t)dtype_size(f));
    }
    /* mlp.proj = linear(gelu out): saves it or its cast. */
    enum dtype hp = rule_lower(r, g);
    saves(lm, POP_LINEAR, act_bytes(m, 4 * c, hp) + weight_cast(m, r, c, 4 * c));
    saves(lm, POP_BIAS_DROPOUT_ADD, bias_dropout_add_mask(m, hp, &sum2));
    lm->out = promote(x1, sum2);
}

static void layer_memory(const struct model *m, const struct dtype_rules *r, enum dtype in, struct layer_memory *lm)
{
    memset(lm, 0, sizeof *lm);
    switch (m->kind) {
    case MODEL_MLP:
    case MODEL_RRELU_MLP: mlp_memory(m, r, in, lm); break;
    case MODEL_BRANCHY: branchy_memory(m, r, in, lm); break;
    case MODEL_GPT_BLOCK: gpt_memory(m, r, in, lm); break;
    case MODEL_BN_MLP: bn_mlp_memory(m, in, lm); break;
    case MODEL_SCALED_MLP: scaled_mlp_memory(m, in, lm); break;
    case MODEL_TWO_STREAM: break; /* two_stream_memory, which follows its streams */
    }
}

/* Walks the layers in order. Each activation between layers is counted
 * once, by whoever keeps it:
 *  - a plain layer whose ops save its input tensor (linear, layer norm);
 *  - a checkpointed segment that starts at it: reentrant saves its input
 *    on the checkpoint node, non-reentrant keeps it in the frame; nothing
 *    inside a checkpointed segment stays (reentrant runs it without a tape,
 *    non-reentrant's pack hook keeps handles, not tensors), so its
 *    intermediates and casts count nothing;
 *  - the loss, for the last one.
 * The model input x was allocated before the step: keeping it is free,
 * casting it is not. */
int64_t model_predict_saved_bytes(const struct model *m, const struct segment_plan *plan)
{
    return model_predict_saved_bytes_keeping(m, plan, 0);
}

/* A selective checkpoint (keep != 0) holds, besides its input, what the
 * kept ops of its layers save, as a plain layer would: their share of
 * by_op, and a layer's input when the op that saves it is kept (the
 * segment's first layer's input is the segment's, counted once). */
int64_t model_predict_saved_bytes_keeping(const struct model *m, const struct segment_plan *plan, unsigned keep)
{
    struct dtype_rules r = {m->autocast != AUTOCAST_OFF, m->autocast == AUTOCAST_F16 ? DT_F16 : DT_BF16};
    int64_t total = 0;
    enum dtype cur = m->dtype;
    struct stream_dtypes streams = {m->dtype, m->dtype};
    for (int i = 0; i < m->layers; i++) {
        struct layer_memory lm;
        struct stream_dtypes entering = streams;
        if (m->kind == MODEL_TWO_STREAM)
            two_stream_memory(m, &r, cur, &streams, &lm);
        else
            layer_memory(m, &r, cur, &lm);
        int plain = i >= plan->plain_from;
        if (plain) {
            if (lm.input_kept && i > 0)
                total += act_bytes(m, m->hidden, cur);
            total += lm.input_casts + lm.internal;
        } else {
            int starts_segment = plan->size > 0 && i % plan->size == 0;
            if (starts_segment && i > 0)
                total += act_bytes(m, m->hidden, cur);
            /* two_stream's r and c enter the segment too; at layer 0 they
             * are the zeros made in forward, so they count there as well. */
            if (starts_segment && m->kind == MODEL_TWO_STREAM)
                total += act_bytes(m, m->hidden, entering.r) + act_bytes(m, m->hidden, entering.c);
            for (int op = 0; op < POP_COUNT; op++)
                if (keep & POLICY_BIT(op))
                    total += lm.by_op[op];
            if (!starts_segment && lm.input_kept && (keep & POLICY_BIT(lm.input_op)))
                total += act_bytes(m, m->hidden, cur);
        }
        cur = lm.out;
    }
    if (m->kind == MODEL_TWO_STREAM)
        cur = promote(cur, streams.r); /* the loss reads x + r */
    /* mse_loss saves the last activation and the target, each as is or as
     * its float32 cast (autocast; the uncast activation is then freed).
     * Its one-element result keeps the storage of the element-wise squared
     * errors it was reduced from (libtorch 1.13's mse_loss: measured, one
     * activation's bytes, not 4), so the loss itself holds an activation. */
    /* Each checkpoint copies the model's buffers when its forward begins
     * and holds the copy until its recompute (module_state.h). */
    total += (int64_t)plan->count * module_state_bytes(m->buffers, m->n_buffers);
    enum dtype x = rule_fp32(&r, cur), t = rule_fp32(&r, m->dtype);
    total += act_bytes(m, m->hidden, x);
    if (t != m->dtype)
        total += act_bytes(m, m->hidden, t);
    total += act_bytes(m, m->hidden, x);
    return total;
}
