#include "ops.h"

#include <math.h>
#include <string.h>

#include "autocast.h"
#include "error.h"
#include "fused_bias_gelu.h"
#ifdef CKPT_WITH_CUDA
#include "cuda/bias_dropout_add_cuda.h"
#include "cuda/fused_bias_gelu_cuda.h"
#endif

#define MAX_SAVES NODE_MAX_SAVED

/* Threads for the atomic dbias reduction: two, so that the order in which
 * rows land in dbias really varies from run to run (see fused_bias_gelu.h). */
#define ATOMIC_DBIAS_THREADS 2

/* Records the node of a one-output op (when grad mode and the inputs ask for
 * it), saves `saves` through the hook stack, and wraps y. Takes ownership of
 * y in every case. A hook's ST_STOP propagates like any status. */
static int op_finish(struct var **out, tensor *y, const char *name, backward_fn backward,
                     struct var *const *inputs, int n_inputs, const tensor *const *saves,
                     int n_saves, const double *scalars, int n_scalars)
{
    struct node *n = NULL;
    int st;
    *out = NULL;
    if (tape_should_record(inputs, n_inputs)) {
        if ((st = node_create(&n, name, backward, inputs, n_inputs, 1))) {
            tensor_free(y);
            return st;
        }
        for (int i = 0; i < n_scalars; i++)
            n->scalars[i] = scalars[i];
        for (int i = 0; i < n_saves; i++) {
            if ((st = node_save(n, saves[i]))) {
                node_release(n);
                /* A recompute that stops at this op's saving still ran it:
                 * observers see it, with its output as a constant about to
                 * be dropped (op_timing prices the recompute by its ops). */
                struct var *ran = NULL;
                if (st == ST_STOP && var_constant(&ran, y) == ST_OK) {
                    tape_observe_op(name, inputs, n_inputs, ran);
                    var_release(ran);
                } else if (st != ST_STOP) {
                    tensor_free(y);
                }
                return st;
            }
        }
    }
    st = var_from_op(out, y, n, 0);
    node_release(n);
    if (!st)
        tape_observe_op(name, inputs, n_inputs, *out);
    return st;
}

/* x itself, or x cast (on the tape) to what the autocast rule asks for. */
static int autocast_input(struct var **out, struct var *x, enum autocast_rule rule)
{
    enum dtype want = autocast_target(rule, tensor_dtype(x->data));
    if (want == tensor_dtype(x->data)) {
        *out = var_retain(x);
        return ST_OK;
    }
    return op_to_dtype(out, x, want);
}

/* Gets saved tensors 0..n-1 of a node; frees them all on failure. */
static int saved_all(struct node *n, tensor **out, int count)
{
    for (int i = 0; i < count; i++) {
        int st = node_saved(n, i, &out[i]);
        if (st) {
            for (int j = 0; j < i; j++)
                tensor_free(out[j]);
            return st;
        }
    }
    return ST_OK;
}

static void free_all(tensor **ts, int count)
{
    for (int i = 0; i < count; i++) {
        tensor_free(ts[i]);
        ts[i] = NULL;
    }
}

/* Frees a temporary as soon as the next result exists (returns ST_OK, so it
 * sits inside an `||` chain): like autograd, whose intermediates die when
 * their last consumer ran, an op holds at most the tensors it still needs. */
static int drop(tensor **t)
{
    tensor_free(*t);
    *t = NULL;
    return ST_OK;
}

/* ---- dtype cast ------------------------------------------------------------ */

static int to_dtype_backward(struct node *n, tensor *const *g, tensor **gi)
{
    return tensor_to_dtype(&gi[0], g[0], n->in_meta[0].dtype);
}

int op_to_dtype(struct var **out, struct var *x, enum dtype dtype)
{
    tensor *y;
    int st = tensor_to_dtype(&y, x->data, dtype);
    if (st)
        return st;
    return op_finish(out, y, "to_dtype", to_dtype_backward, &x, 1, NULL, 0, NULL, 0);
}

/* ---- device move ----------------------------------------------------------- */

static int to_device_backward(struct node *n, tensor *const *g, tensor **gi)
{
    return tensor_to_device(&gi[0], g[0], n->in_meta[0].device);
}

int op_to_device(struct var **out, struct var *x, int device)
{
    tensor *y;
    int st = tensor_to_device(&y, x->data, device);
    if (st)
        return st;
    return op_finish(out, y, "to_device", to_device_backward, &x, 1, NULL, 0, NULL, 0);
}

/* ---- linear ---------------------------------------------------------------- */

/* Flattens all leading dims: [..., k] -> [N, k]. */
static int as_matrix(tensor **out, const tensor *t)
{
    int64_t shape[2] = {-1, tensor_size(t, -1)};
    return tensor_reshape(out, t, 2, shape);
}

/* The same formulas as PyTorch's addmm/mm derivatives on the flattened
 * input, so the result is bitwise what torch autograd computes:
 * dx = g·w, dwᵀ = xᵀ·g, db = Σ_rows g. */
static int linear_backward(struct node *n, tensor *const *g, tensor **gi)
{
    tensor *saved[2] = {0}, *g2 = NULL, *x2 = NULL, *gt = NULL, *dx2 = NULL;
    int st = saved_all(n, saved, 2);
    if (st)
        return st;
    if ((st = as_matrix(&g2, g[0])) || (st = as_matrix(&x2, saved[0])))
        goto out;
    if (n->next[0].node) {
        if ((st = tensor_matmul(&dx2, g2, saved[1])) ||
            (st = tensor_reshape(&gi[0], dx2, n->in_meta[0].ndim, n->in_meta[0].shape)))
            goto out;
    }
    if (n->next[1].node) {
        /* dW = g^T x, computed in W's own layout (as autograd's mm backward
         * does for a transposed weight): no transposed copy, so no second
         * weight-sized buffer at backward's peak. */
        if ((st = tensor_transpose(&gt, g2, 0, 1)) || (st = tensor_matmul(&gi[1], gt, x2)))
            goto out;
    }
    if (n->n_inputs > 2 && n->next[2].node) {
        int64_t dim0 = 0;
        if ((st = tensor_sum_dims(&gi[2], g2, &dim0, 1, 0)))
            goto out;
    }
out:
    free_all(saved, 2);
    tensor_free(g2);
    tensor_free(x2);
    tensor_free(gt);
    tensor_free(dx2);
    return st;
}

int op_linear(struct var **out, struct var *x, struct var *w, struct var *b)
{
    struct var *cx = NULL, *cw = NULL, *cb = NULL;
    int st;
    if ((st = autocast_input(&cx, x, AUTOCAST_LOWER)) || (st = autocast_input(&cw, w, AUTOCAST_LOWER)) ||
        (b && (st = autocast_input(&cb, b, AUTOCAST_LOWER))))
        goto out;
    tensor *y;
    if ((st = tensor_linear(&y, cx->data, cw->data, cb ? cb->data : NULL)))
        goto out;
    struct var *inputs[3] = {cx, cw, cb};
    const tensor *saves[2] = {cx->data, cw->data};
    st = op_finish(out, y, "linear", linear_backward, inputs, cb ? 3 : 2, saves, 2, NULL, 0);
out:
    var_release(cx);
    var_release(cw);
    var_release(cb);
    return st;
}

/* ---- GELU ------------------------------------------------------------------ */

static int gelu_backward(struct node *n, tensor *const *g, tensor **gi)
{
    tensor *x;
    int st = node_saved(n, 0, &x);
    if (st)
        return st;
    st = tensor_gelu_backward(&gi[0], g[0], x, n->ints[0]);
    tensor_free(x);
    return st;
}

int op_gelu(struct var **out, struct var *x, int tanh_approx)
{
    tensor *y;
    int st = tensor_gelu(&y, x->data, tanh_approx);
    if (st)
        return st;
    const tensor *saves[1] = {x->data};
    if ((st = op_finish(out, y, tanh_approx ? "gelu_tanh" : "gelu", gelu_backward, &x, 1, saves, 1, NULL, 0)))
        return st;
    if ((*out)->grad_fn)
        (*out)->grad_fn->ints[0] = tanh_approx;
    return ST_OK;
}

/* ---- add ------------------------------------------------------------------- */

static int add_backward(struct node *n, tensor *const *g, tensor **gi)
{
    for (int i = 0; i < 2; i++) {
        if (!n->next[i].node)
            continue;
        int st = tensor_sum_to(&gi[i], g[0], n->in_meta[i].ndim, n->in_meta[i].shape);
        if (st)
            return st;
    }
    return ST_OK;
}

int op_add(struct var **out, struct var *a, struct var *b)
{
    tensor *y;
    int st = tensor_add(&y, a->data, b->data);
    if (st)
        return st;
    struct var *inputs[2] = {a, b};
    return op_finish(out, y, "add", add_backward, inputs, 2, NULL, 0, NULL, 0);
}

/* ---- scale by a non-tensor factor -------------------------------------------- */

static int scale_backward(struct node *n, tensor *const *g, tensor **gi)
{
    return tensor_mul_scalar(&gi[0], g[0], n->scalars[0]);
}

int op_scale(struct var **out, struct var *x, double s)
{
    tensor *y;
    int st = tensor_mul_scalar(&y, x->data, s);
    if (st)
        return st;
    return op_finish(out, y, "scale", scale_backward, &x, 1, NULL, 0, &s, 1);
}

int op_bias_gelu_unfused(struct var **out, struct var *x, struct var *b)
{
    struct var *sum;
    int st = op_add(&sum, x, b);
    if (st)
        return st;
    st = op_gelu(out, sum, 1);
    var_release(sum);
    return st;
}

/* ---- fused bias+GELU (the harness's own kernel) ---------------------------- */

/* The fused kernels run where the tensors are: the C kernel on the CPU, the
 * CUDA kernel (harness/cuda/) on a CUDA device in a CUDA build. */
static int require_kernel_device(const tensor *t, const char *what)
{
#ifndef CKPT_WITH_CUDA
    if (tensor_device(t) != DEVICE_CPU)
        return error_set(ST_RUN, "fused bias+GELU: %s is on a CUDA device; this build has only the CPU kernel", what);
#else
    (void)t;
    (void)what;
#endif
    return ST_OK;
}

/* y = fused_bias_gelu(x, b) on x's device; all contiguous, one dtype. */
static int fused_forward_kernel(const tensor *x, const tensor *b, tensor *y, size_t rows, size_t cols)
{
    const int dev = tensor_device(x);
    if (dev == DEVICE_CPU)
        return fused_bias_gelu_forward(tensor_data_const(x), tensor_data_const(b), tensor_data(y), rows, cols,
                                       tensor_dtype(x));
#ifdef CKPT_WITH_CUDA
    void *stream;
    int st = aten_cuda_stream(dev, &stream);
    if (st)
        return st;
    return cuda_fused_bias_gelu_forward(tensor_raw_data_const(x), tensor_raw_data_const(b), tensor_raw_data(y),
                                        rows, cols, tensor_dtype(x), dev, stream);
#else
    return require_kernel_device(x, "input");
#endif
}

/* dx and dbias on x's device (dy, x, b contiguous, one dtype). */
static int fused_backward_kernel(const tensor *dy, const tensor *x, const tensor *b, tensor *dx, tensor *db,
                                 size_t rows, size_t cols, enum dbias_reduction red)
{
    const int dev = tensor_device(x);
    if (dev == DEVICE_CPU)
        return fused_bias_gelu_backward(tensor_data_const(dy), tensor_data_const(x), tensor_data_const(b),
                                        tensor_data(dx), tensor_data(db), rows, cols, tensor_dtype(x), red,
                                        ATOMIC_DBIAS_THREADS);
#ifdef CKPT_WITH_CUDA
    /* The reduction's scratch comes from the caching allocator, so the memory
     * statistics see it. Freeing it right after the launch is safe: the
     * allocator hands the block out again only to work queued later on the
     * same stream. */
    tensor *ws = NULL;
    void *stream;
    const size_t bytes = cuda_fbg_workspace_bytes(rows, cols, red);
    int64_t floats = (int64_t)(bytes / sizeof(float));
    int st = aten_cuda_stream(dev, &stream);
    if (!st && bytes > 0)
        st = tensor_empty(&ws, DT_F32, 1, &floats, dev);
    if (!st)
        st = cuda_fused_bias_gelu_backward(tensor_raw_data_const(dy), tensor_raw_data_const(x),
                                           tensor_raw_data_const(b), tensor_raw_data(dx), tensor_raw_data(db),
                                           ws ? tensor_raw_data(ws) : NULL, bytes, rows, cols, tensor_dtype(x), red,
                                           dev, stream);
    tensor_free(ws);
    return st;
#else
    (void)dy;
    (void)b;
    (void)dx;
    (void)db;
    (void)rows;
    (void)cols;
    (void)red;
    return require_kernel_device(x, "input");
#endif
}

static int fused_backward(struct node *n, tensor *const *g, tensor **gi)
{
    tensor *saved[2] = {0}, *dy = NULL, *dx = NULL, *db = NULL;
    int st = saved_all(n, saved, 2);
    if (st)
        return st;
    int64_t cols = tensor_size(saved[1], 0);
    size_t rows = tensor_numel(saved[0]) / (size_t)cols;
    int64_t shape[TENSOR_MAX_DIMS];
    int nd = tensor_shape(saved[0], shape);
    const int dev = tensor_device(saved[0]);
    if ((st = tensor_contiguous(&dy, g[0])) ||
        (st = tensor_empty(&dx, tensor_dtype(saved[0]), nd, shape, dev)) ||
        (st = tensor_empty(&db, tensor_dtype(saved[1]), 1, &cols, dev)))
        goto out;
    st = fused_backward_kernel(dy, saved[0], saved[1], dx, db, rows, (size_t)cols,
                               n->ints[0] == FUSED_ATOMIC ? DBIAS_ATOMIC : DBIAS_DETERMINISTIC);
    if (st)
        goto out;
    if (n->next[0].node) {
        gi[0] = dx;
        dx = NULL;
    }
    if (n->next[1].node) {
        gi[1] = db;
        db = NULL;
    }
out:
    free_all(saved, 2);
    tensor_free(dy);
    tensor_free(dx);
    tensor_free(db);
    return st;
}

int op_bias_gelu_fused(struct var **out, struct var *x, struct var *b, enum fused_variant variant)
{
    struct var *cb = NULL;
    tensor *xc = NULL, *y = NULL;
    int st;
    /* The kernel wants one dtype: the bias follows x (autocast's output). */
    if (tensor_dtype(b->data) != tensor_dtype(x->data))
        st = op_to_dtype(&cb, b, tensor_dtype(x->data));
    else
        st = (cb = var_retain(b)) ? ST_OK : ST_INTERNAL;
    if (st)
        return st;
    if ((st = require_kernel_device(x->data, "input")) || (st = tensor_contiguous(&xc, x->data)))
        goto out;
    int64_t shape[TENSOR_MAX_DIMS];
    int nd = tensor_shape(xc, shape);
    int64_t cols = shape[nd - 1];
    if (tensor_ndim(cb->data) != 1 || tensor_size(cb->data, 0) != cols ||
        tensor_device(cb->data) != tensor_device(xc)) {
        st = error_set(ST_INTERNAL, "fused bias+GELU: bias must be [%lld] on the input's device", (long long)cols);
        goto out;
    }
    if ((st = tensor_empty(&y, tensor_dtype(xc), nd, shape, tensor_device(xc))))
        goto out;
    if ((st = fused_forward_kernel(xc, cb->data, y, tensor_numel(xc) / (size_t)cols, (size_t)cols)))
        goto out;
    struct var *inputs[2] = {x, cb};
    const tensor *saves[2] = {xc, cb->data};
    st = op_finish(out, y, variant == FUSED_ATOMIC ? "bias_gelu_fused_atomic" : "bias_gelu_fused",
                   fused_backward, inputs, 2, saves, 2, NULL, 0);
    y = NULL;
    if (!st && (*out)->grad_fn)
        (*out)->grad_fn->ints[0] = variant;
out:
    tensor_free(xc);
    tensor_free(y);
    var_release(cb);
    return st;
}

/* ---- dropout ----------------------------------------------------------------- */

/* noise = bernoulli(1 - p) / (1 - p): the draw and the scaling ATen's CPU
 * dropout does, so masks and outputs are bitwise ATen's. The division is in
 * place, as ATen's is (noise.div_): one buffer per dropout, not two. */
static int dropout_noise(tensor **noise, const tensor *like, double p)
{
    if (p >= 1.0)
        return tensor_zeros_like(noise, like);
    int st = tensor_bernoulli(noise, like, 1.0 - p);
    if (st)
        return st;
    if ((st = tensor_div_scalar_(*noise, 1.0 - p))) {
        tensor_free(*noise);
        *noise = NULL;
    }
    return st;
}

static int mul_saved_backward(struct node *n, tensor *const *g, tensor **gi)
{
    tensor *noise;
    int st = node_saved(n, 0, &noise);
    if (st)
        return st;
    st = tensor_mul(&gi[0], g[0], noise);
    tensor_free(noise);
    return st;
}

int op_dropout(struct var **out, struct var *x, double p)
{
    if (p <= 0.0) {
        *out = var_retain(x);
        return ST_OK;
    }
    tensor *noise, *y;
    int st = dropout_noise(&noise, x->data, p);
    if (st)
        return st;
    if ((st = tensor_mul(&y, x->data, noise))) {
        tensor_free(noise);
        return st;
    }
    const tensor *saves[1] = {noise};
    st = op_finish(out, y, "dropout", mul_saved_backward, &x, 1, saves, 1, &p, 1);
    tensor_free(noise);
    return st;
}

/* ---- fused bias + dropout + residual add ------------------------------------ */

static int bias_dropout_add_backward(struct node *n, tensor *const *g, tensor **gi)
{
    tensor *noise = NULL, *dx = NULL;
    int st = node_saved(n, 0, &noise);
    if (st)
        return st;
    if ((st = tensor_mul(&dx, g[0], noise)))
        goto out;
    if (n->next[1].node && (st = tensor_sum_to(&gi[1], dx, n->in_meta[1].ndim, n->in_meta[1].shape)))
        goto out;
    if (n->next[2].node && (st = tensor_share(&gi[2], g[0])))
        goto out;
    if (n->next[0].node) {
        gi[0] = dx;
        dx = NULL;
    }
out:
    tensor_free(noise);
    tensor_free(dx);
    return st;
}

#ifdef CKPT_WITH_CUDA
/* The float dtype ATen's promotion gives a mix of two (bf16 with f16 is f32). */
static enum dtype promoted(enum dtype a, enum dtype b)
{
    return a == b ? a : (a == DT_F64 || b == DT_F64) ? DT_F64 : DT_F32;
}

static int cast_contiguous(tensor **out, const tensor *t, enum dtype dt)
{
    tensor *cast = NULL;
    int st = tensor_dtype(t) == dt ? tensor_share(&cast, t) : tensor_to_dtype(&cast, t, dt);
    if (!st)
        st = tensor_contiguous(out, cast);
    tensor_free(cast);
    return st;
}

/* The CUDA path: one fused kernel (harness/cuda/bias_dropout_add_cuda.h)
 * whose mask comes from the device's default generator, reserved through the
 * shim, so a restored generator state replays it. Inputs are cast (off the
 * tape, as ATen's add promotes internally) to their common dtype; the tape
 * casts gradients back to each input's dtype. Saves the scaled mask, like
 * the CPU path, so the backward is shared. */
static int bias_dropout_add_cuda(struct var **out, struct var *x, struct var *b, struct var *residual, double p)
{
    const int dev = tensor_device(x->data);
    const enum dtype dt =
        promoted(promoted(tensor_dtype(x->data), tensor_dtype(b->data)), tensor_dtype(residual->data));
    tensor *xc = NULL, *bc = NULL, *rc = NULL, *y = NULL, *noise = NULL;
    int64_t shape[TENSOR_MAX_DIMS], rshape[TENSOR_MAX_DIMS];
    const int nd = tensor_shape(x->data, shape);
    int same = nd >= 1 && tensor_shape(residual->data, rshape) == nd && tensor_ndim(b->data) == 1 &&
               tensor_size(b->data, 0) == shape[nd - 1] && tensor_device(b->data) == dev &&
               tensor_device(residual->data) == dev;
    for (int i = 0; same && i < nd; i++)
        same = shape[i] == rshape[i];
    if (!same)
        return error_set(ST_INTERNAL, "fused bias+dropout+add: needs x [..., C], bias [C] and a residual of x's "
                                      "shape, all on one device");
    const size_t cols = (size_t)shape[nd - 1];
    const size_t rows = cols ? tensor_numel(x->data) / cols : 0;
    void *stream;
    uint64_t seed = 0, offset = 0;
    int st;
    if ((st = cast_contiguous(&xc, x->data, dt)) || (st = cast_contiguous(&bc, b->data, dt)) ||
        (st = cast_contiguous(&rc, residual->data, dt)) || (st = tensor_empty(&y, dt, nd, shape, dev)) ||
        (st = tensor_empty(&noise, dt, nd, shape, dev)) || (st = aten_cuda_stream(dev, &stream)))
        goto out;
    /* Like torch, an empty input draws nothing (the stream stays in step). */
    if (rows * cols > 0 &&
        ((st = aten_cuda_philox_reserve(dev, CUDA_BDA_PHILOX_INCREMENT, &seed, &offset)) ||
         (st = cuda_bias_dropout_add(tensor_raw_data_const(xc), tensor_raw_data_const(bc), tensor_raw_data_const(rc),
                                     tensor_raw_data(y), tensor_raw_data(noise), rows, cols, dt, p, seed, offset, dev,
                                     stream))))
        goto out;
    struct var *inputs[3] = {x, b, residual};
    const tensor *saves[1] = {noise};
    st = op_finish(out, y, "bias_dropout_add", bias_dropout_add_backward, inputs, 3, saves, 1, &p, 1);
    y = NULL;
out:
    tensor_free(xc);
    tensor_free(bc);
    tensor_free(rc);
    tensor_free(noise);
    tensor_free(y);
    return st;
}
#endif

int op_bias_dropout_add(struct var **out, struct var *x, struct var *b, struct var *residual, double p)
{
    tensor *sum = NULL, *noise = NULL, *dropped = NULL, *y = NULL;
    int st;
#ifdef CKPT_WITH_CUDA
    /* p = 0 draws nothing and p = 1 drops everything: the plain path below
     * does both without a kernel on any device. */
    if (tensor_device(x->data) != DEVICE_CPU && p > 0.0 && p < 1.0)
        return bias_dropout_add_cuda(out, x, b, residual, p);
#endif
    if ((st = tensor_add(&sum, x->data, b->data)))
        return st;
    if (p > 0.0) {
        if ((st = dropout_noise(&noise, sum, p)) || (st = tensor_mul(&dropped, sum, noise)))
            goto out;
    } else {
        /* Nothing drawn, nothing scaled: the mask is all ones. */
        if ((st = tensor_full(&noise, tensor_dtype(sum), 0, NULL, tensor_device(sum), 1.0)) ||
            (st = tensor_share(&dropped, sum)))
            goto out;
    }
    drop(&sum);
    if ((st = tensor_add(&y, residual->data, dropped)) || drop(&dropped))
        goto out;
    struct var *inputs[3] = {x, b, residual};
    const tensor *saves[1] = {noise};
    st = op_finish(out, y, "bias_dropout_add", bias_dropout_add_backward, inputs, 3, saves, 1, &p, 1);
    y = NULL;
out:
    tensor_free(sum);
    tensor_free(noise);
    tensor_free(dropped);
    tensor_free(y);
    return st;
}

/* ---- layer norm ----------------------------------------------------------------- */

static int layer_norm_backward(struct node *n, tensor *const *g, tensor **gi)
{
    tensor *s[5] = {0};
    int st = saved_all(n, s, 5);
    if (st)
        return st;
    st = tensor_layer_norm_backward(n->next[0].node ? &gi[0] : NULL, n->next[1].node ? &gi[1] : NULL,
                                    n->next[2].node ? &gi[2] : NULL, g[0], s[0], s[1], s[2], s[3], s[4]);
    free_all(s, 5);
    return st;
}

int op_layer_norm(struct var **out, struct var *x, struct var *w, struct var *b, double eps)
{
    struct var *cx = NULL, *cw = NULL, *cb = NULL;
    tensor *y = NULL, *mean = NULL, *rstd = NULL;
    int st;
    if ((st = autocast_input(&cx, x, AUTOCAST_FP32)) || (st = autocast_input(&cw, w, AUTOCAST_FP32)) ||
        (st = autocast_input(&cb, b, AUTOCAST_FP32)))
        goto out;
    if ((st = tensor_layer_norm(&y, &mean, &rstd, cx->data, cw->data, cb->data, eps)))
        goto out;
    struct var *inputs[3] = {cx, cw, cb};
    const tensor *saves[5] = {cx->data, mean, rstd, cw->data, cb->data};
    st = op_finish(out, y, "layer_norm", layer_norm_backward, inputs, 3, saves, 5, &eps, 1);
out:
    tensor_free(mean);
    tensor_free(rstd);
    var_release(cx);
    var_release(cw);
    var_release(cb);
    return st;
}

/* ---- causal attention ------------------------------------------------------------- */

/* [B, T, C] slice [start, start + C) of the last dim -> [B, H, T, d]. */
static int split_heads(tensor **out, const tensor *qkv, int64_t start, int64_t c, int heads)
{
    tensor *part = NULL, *r = NULL, *t = NULL;
    int64_t shape[4] = {tensor_size(qkv, 0), tensor_size(qkv, 1), heads, c / heads};
    int st;
    if (!(st = tensor_narrow(&part, qkv, 2, start, c)) && !(st = tensor_reshape(&r, part, 4, shape)) &&
        !(st = tensor_transpose(&t, r, 1, 2)))
        st = tensor_contiguous(out, t);
    tensor_free(part);
    tensor_free(r);
    tensor_free(t);
    return st;
}

/* [B, H, T, d] -> [B, T, H·d] */
static int merge_heads(tensor **out, const tensor *x)
{
    tensor *t = NULL, *c = NULL;
    int64_t shape[3] = {tensor_size(x, 0), tensor_size(x, 2), tensor_size(x, 1) * tensor_size(x, 3)};
    int st;
    if (!(st = tensor_transpose(&t, x, 1, 2)) && !(st = tensor_contiguous(&c, t)))
        st = tensor_reshape(out, c, 3, shape);
    tensor_free(t);
    tensor_free(c);
    return st;
}

static int transposed_last(tensor **out, const tensor *t) { return tensor_transpose(out, t, -2, -1); }

/* Cast to dtype, or share when it already is. */
static int as_dtype(tensor **out, const tensor *t, enum dtype dt)
{
    return tensor_dtype(t) == dt ? tensor_share(out, t) : tensor_to_dtype(out, t, dt);
}

static int attention_backward(struct node *n, tensor *const *g, tensor **gi)
{
    tensor *s[4] = {0}; /* q, k, v, probs (float32 under autocast) */
    tensor *go = NULL, *vt = NULL, *dprobs = NULL, *dprobs_p = NULL, *probs_mm = NULL, *pt = NULL, *dv = NULL;
    tensor *dmasked = NULL, *dscores0 = NULL, *dscores = NULL, *dscores_mm = NULL, *dq = NULL, *qt = NULL;
    tensor *dkt = NULL, *dk = NULL, *parts[3] = {0}, *gsplit = NULL;
    int64_t c = n->ints[1];
    int heads = n->ints[0];
    int st = saved_all(n, s, 4);
    if (st)
        return st;
    enum dtype mm_dtype = tensor_dtype(s[0]);
    if ((st = as_dtype(&gsplit, g[0], mm_dtype)) || (st = split_heads(&go, gsplit, 0, c, heads)) || drop(&gsplit) ||
        (st = transposed_last(&vt, s[2])) || (st = tensor_matmul(&dprobs, go, vt)) || drop(&vt) ||
        (st = as_dtype(&probs_mm, s[3], mm_dtype)) || (st = transposed_last(&pt, probs_mm)) ||
        (st = tensor_matmul(&dv, pt, go)) || drop(&pt) || drop(&probs_mm) || drop(&go) ||
        (st = as_dtype(&dprobs_p, dprobs, tensor_dtype(s[3]))) || drop(&dprobs) ||
        (st = tensor_softmax_backward(&dmasked, dprobs_p, s[3], -1, tensor_dtype(s[3]))) || drop(&dprobs_p) ||
        drop(&s[3]) ||
        /* Back through the forward's cast to float32 first, then mask and
         * scale in the matmul dtype, as autograd of that forward does. */
        (st = as_dtype(&dscores0, dmasked, mm_dtype)) || drop(&dmasked) ||
        (st = tensor_causal_zero(&dscores, dscores0)) || drop(&dscores0) ||
        (st = tensor_div_scalar(&dscores_mm, dscores, n->scalars[0])) || drop(&dscores) ||
        (st = tensor_matmul(&dq, dscores_mm, s[1])) || (st = transposed_last(&qt, s[0])) ||
        (st = tensor_matmul(&dkt, qt, dscores_mm)) || drop(&qt) || drop(&dscores_mm) ||
        (st = transposed_last(&dk, dkt)) || drop(&dkt))
        goto out;
    if ((st = merge_heads(&parts[0], dq)) || drop(&dq) || (st = merge_heads(&parts[1], dk)) || drop(&dk) ||
        (st = merge_heads(&parts[2], dv)) || drop(&dv))
        goto out;
    st = tensor_cat(&gi[0], (const tensor *const *)parts, 3, 2);
out:
    free_all(s, 4);
    free_all(parts, 3);
    tensor *all[] = {go, vt, dprobs, dprobs_p, probs_mm, pt, dv, dmasked, dscores0, dscores, dscores_mm, dq, qt, dkt, dk, gsplit};
    free_all(all, (int)(sizeof all / sizeof all[0]));
    return st;
}

int op_causal_attention(struct var **out, struct var *qkv_in, int heads)
{
    struct var *qkv = NULL;
    tensor *q = NULL, *k = NULL, *v = NULL, *kt = NULL, *scores = NULL, *scaled = NULL, *masked = NULL;
    tensor *masked_sm = NULL, *probs = NULL, *probs_mm = NULL, *o = NULL, *y = NULL;
    int st;
    if (tensor_ndim(qkv_in->data) != 3 || tensor_size(qkv_in->data, 2) % (3 * heads) != 0)
        return error_set(ST_INTERNAL, "attention: qkv must be [B, T, 3C] with C divisible by %d heads", heads);
    int64_t c = tensor_size(qkv_in->data, 2) / 3;
    double scale = sqrt((double)(c / heads));
    if ((st = autocast_input(&qkv, qkv_in, AUTOCAST_LOWER)))
        return st;
    if ((st = split_heads(&q, qkv->data, 0, c, heads)) || (st = split_heads(&k, qkv->data, c, c, heads)) ||
        (st = split_heads(&v, qkv->data, 2 * c, c, heads)) || (st = transposed_last(&kt, k)) ||
        (st = tensor_matmul(&scores, q, kt)) || drop(&kt) || (st = tensor_div_scalar(&scaled, scores, scale)) ||
        drop(&scores) || (st = tensor_causal_fill(&masked, scaled, -INFINITY)) || drop(&scaled) ||
        (st = as_dtype(&masked_sm, masked, autocast_target(AUTOCAST_FP32, tensor_dtype(masked)))) ||
        drop(&masked) || (st = tensor_softmax(&probs, masked_sm, -1)) || drop(&masked_sm) ||
        (st = as_dtype(&probs_mm, probs, tensor_dtype(v))) || (st = tensor_matmul(&o, probs_mm, v)) ||
        drop(&probs_mm) || (st = merge_heads(&y, o)) || drop(&o))
        goto out;
    const tensor *saves[4] = {q, k, v, probs};
    double scalars[1] = {scale};
    st = op_finish(out, y, "causal_attention", attention_backward, &qkv, 1, saves, 4, scalars, 1);
    y = NULL;
    if (!st && (*out)->grad_fn) {
        (*out)->grad_fn->ints[0] = heads;
        (*out)->grad_fn->ints[1] = (int)c;
    }
out:
    {
        tensor *all[] = {q, k, v, kt, scores, scaled, masked, masked_sm, probs, probs_mm, o, y};
        free_all(all, (int)(sizeof all / sizeof all[0]));
    }
    var_release(qkv);
    return st;
}

/* ---- losses ----------------------------------------------------------------------- */

static int mse_backward(struct node *n, tensor *const *g, tensor **gi)
{
    tensor *s[2] = {0};
    int st = saved_all(n, s, 2);
    if (st)
        return st;
    st = tensor_mse_loss_backward(&gi[0], g[0], s[0], s[1]);
    /* d/dtarget with the roles swapped, as torch's derivative does: negating
     * dx would give -0 where x == target and torch gives +0. */
    if (!st && n->next[1].node)
        st = tensor_mse_loss_backward(&gi[1], g[0], s[1], s[0]);
    free_all(s, 2);
    return st;
}

int op_mse_loss(struct var **out, struct var *x, struct var *target)
{
    struct var *cx = NULL, *ct = NULL;
    tensor *y;
    int st;
    if ((st = autocast_input(&cx, x, AUTOCAST_FP32)) || (st = autocast_input(&ct, target, AUTOCAST_FP32)))
        goto out;
    if ((st = tensor_mse_loss(&y, cx->data, ct->data)))
        goto out;
    struct var *inputs[2] = {cx, ct};
    const tensor *saves[2] = {cx->data, ct->data};
    st = op_finish(out, y, "mse_loss", mse_backward, inputs, 2, saves, 2, NULL, 0);
out:
    var_release(cx);
    var_release(ct);
    return st;
}

static int cross_entropy_backward(struct node *n, tensor *const *g, tensor **gi)
{
    tensor *s[2] = {0};
    int st = saved_all(n, s, 2);
    if (st)
        return st;
    st = tensor_cross_entropy_backward(&gi[0], g[0], s[0], s[1]);
    free_all(s, 2);
    return st;
}

int op_cross_entropy(struct var **out, struct var *logits, struct var *target)
{
    struct var *cl = NULL;
    tensor *loss = NULL, *logp = NULL;
    int st;
    if ((st = autocast_input(&cl, logits, AUTOCAST_FP32)))
        return st;
    if ((st = tensor_cross_entropy(&loss, &logp, cl->data, target->data)))
        goto out;
    struct var *inputs[2] = {cl, target};
    const tensor *saves[2] = {logp, target->data};
    st = op_finish(out, loss, "cross_entropy", cross_entropy_backward, inputs, 2, saves, 2, NULL, 0);
out:
    tensor_free(logp);
    var_release(cl);
    return st;
}

/* ---- RReLU --------------------------------------------------------------------- */

static int rrelu_backward(struct node *n, tensor *const *g, tensor **gi)
{
    tensor *s[2] = {0};
    int st = saved_all(n, s, 2);
    if (st)
        return st;
    st = tensor_rrelu_backward(&gi[0], g[0], s[0], s[1], n->scalars[0], n->scalars[1]);
    free_all(s, 2);
    return st;
}

int op_rrelu(struct var **out, struct var *x, double lower, double upper)
{
    tensor *y, *noise;
    int st = tensor_rrelu(&y, &noise, x->data, lower, upper);
    if (st)
        return st;
    const tensor *saves[2] = {x->data, noise};
    double scalars[2] = {lower, upper};
    st = op_finish(out, y, "rrelu", rrelu_backward, &x, 1, saves, 2, scalars, 2);
    tensor_free(noise);
    return st;
}

/* ---- batch norm (training) ------------------------------------------------------- */

/* x [.., C] as [N, C] (a view: no bytes). */
static int rows_of(tensor **out, const tensor *x)
{
    int64_t c = tensor_size(x, -1);
    int64_t shape[2] = {c ? (int64_t)(tensor_numel(x) / c) : 0, c};
    return tensor_reshape(out, x, 2, shape);
}

static int batch_norm_backward(struct node *n, tensor *const *g, tensor **gi)
{
    tensor *s[4] = {0}, *x2 = NULL, *g2 = NULL, *dx2 = NULL;
    int st = saved_all(n, s, 4);
    if (st)
        return st;
    if (!(st = rows_of(&x2, s[0])) && !(st = rows_of(&g2, g[0])))
        st = tensor_batch_norm_train_backward(n->next[0].node ? &dx2 : NULL, n->next[1].node ? &gi[1] : NULL,
                                              n->next[2].node ? &gi[2] : NULL, g2, x2, s[1], s[2], s[3],
                                              n->scalars[0]);
    if (!st && dx2)
        st = tensor_reshape(&gi[0], dx2, n->in_meta[0].ndim, n->in_meta[0].shape);
    tensor_free(dx2);
    tensor_free(g2);
    tensor_free(x2);
    free_all(s, 4);
    return st;
}

int op_batch_norm(struct var **out, struct var *x, struct var *w, struct var *b, tensor *running_mean,
                  tensor *running_var, double momentum, double eps)
{
    tensor *x2 = NULL, *y2 = NULL, *y = NULL, *mean = NULL, *invstd = NULL;
    int64_t shape[TENSOR_MAX_DIMS];
    int ndim = tensor_shape(x->data, shape);
    int st;
    if ((st = rows_of(&x2, x->data)) ||
        (st = tensor_batch_norm_train(&y2, &mean, &invstd, x2, w->data, b->data, running_mean, running_var,
                                      momentum, eps)) ||
        (st = tensor_reshape(&y, y2, ndim, shape)))
        goto out;
    struct var *inputs[3] = {x, w, b};
    const tensor *saves[4] = {x->data, w->data, mean, invstd};
    st = op_finish(out, y, "batch_norm", batch_norm_backward, inputs, 3, saves, 4, &eps, 1);
    y = NULL;
out:
    tensor_free(x2);
    tensor_free(y2);
    tensor_free(y);
    tensor_free(mean);
    tensor_free(invstd);
    return st;
}

/* ---- fake quantisation ------------------------------------------------------------ */

static int straight_through_backward(struct node *n, tensor *const *g, tensor **gi)
{
    (void)n;
    return tensor_share(&gi[0], g[0]);
}

int op_fake_quantize(struct var **out, struct var *x, const tensor *scale, double fp_max)
{
    tensor *y;
    int st = tensor_fake_quantize(&y, x->data, scale, fp_max);
    if (st)
        return st;
    return op_finish(out, y, "fake_quantize", straight_through_backward, &x, 1, NULL, 0, &fp_max, 1);
}

const char *op_name_of(const struct node *n) { return n ? n->name : "(none)"; }
