/* aten: the C API over ATen/libtorch, the only C++ in the project.
 * Tensors are opaque handles; every function that yields a tensor gives the
 * caller a new handle it must tensor_free (handles share storage the way
 * at::Tensor does). Every call returns a status (error.h) and never lets a
 * C++ exception through; the message lands in the error slot as one line,
 * "<function>: <ATen's first line>" (user-input errors such as a bad device
 * string carry just the text, for the CLI to prefix with the flag).
 * Devices are ints: DEVICE_CPU (-1) or a CUDA index (0, 1, ...). */
#ifndef CKPT_ATEN_H
#define CKPT_ATEN_H

#include <stddef.h>
#include <stdint.h>

#include "dtype.h"
#include "host_tensor.h"
#include "counting_allocator.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DEVICE_CPU (-1)
#define TENSOR_MAX_DIMS 8

typedef struct tensor tensor;

/* ---- process set-up -------------------------------------------------- */

/* Installs the counting CPU allocator (must run before the first tensor is
 * made; later calls do nothing). Returns ST_OK, or ST_INPUT when the
 * CKPT_MEMORY_LIMIT environment variable is malformed. */
int aten_init(void);
const char *aten_libtorch_version(void);   /* compiled against (= running): "2.11.0+cu130" */
int aten_cuda_available(void);             /* built with CUDA and a device present */
/* 1 when the shim was compiled against a CUDA libtorch (CKPT_WITH_CUDA),
 * whether or not a device is present: tests and --version report it. */
int aten_built_with_cuda(void);
int aten_device_count(void);               /* CUDA devices (0 on CPU builds) */
/* "cpu" or the CUDA device's name. */
const char *aten_device_name(int device, char *buf, size_t len);
int aten_set_threads(int n);
int aten_get_threads(void);
/* The fewest elements libtorch splits across intra-op threads
 * (at::internal::GRAIN_SIZE): an op on fewer runs on one thread. */
int64_t aten_parallel_grain(void);
/* Waits for queued device work (no-op on CPU); timings call it. */
int aten_synchronize(int device);
/* Parses "cpu", "cuda", "cuda:N" into a device id. */
int aten_parse_device(const char *text, int *device);

/* "cpu" or "cuda:N" */
const char *aten_device_str(int device, char *buf, size_t len);

/* The counting CPU allocator (counting_allocator.h). */

/* ---- memory accounting --------------------------------------------- */

struct mem_stats {
    int64_t live_bytes;   /* bytes held now by tensors */
    int64_t peak_bytes;   /* highest live_bytes since the last reset */
    int64_t alloc_count;  /* allocations since start */
};
/* CPU: the counting allocator (exact). CUDA: the caching allocator's
 * allocated_bytes current/peak for that device. */
int aten_mem_stats(int device, struct mem_stats *out);
int aten_mem_reset_peak(int device);

/* ---- default generators (one per device) ----------------------------- */

/* The state of a device's default generator as opaque bytes (CPU: the
 * mt19937 state, CUDA: seed + Philox offset). *out is malloc'd. */
int aten_rng_get_state(int device, uint8_t **out, size_t *len);
int aten_rng_set_state(int device, const uint8_t *state, size_t len);
int aten_rng_manual_seed(int device, uint64_t seed);

/* ---- CUDA: what the harness's own kernels (harness/cuda/) need ---------- */

/* The current stream of CUDA device `device` as a cudaStream_t (NULL is the
 * legacy default stream, ATen's default), so the kernels queue behind and
 * ahead of ATen's work in order. ST_INPUT in a build without CUDA,
 * ST_INTERNAL for DEVICE_CPU. */
int aten_cuda_stream(int device, void **stream);
/* Philox (seed, offset) for one kernel from the default generator of CUDA
 * device `device`, advancing its offset by `increment` (32-bit values per
 * subsequence, a multiple of 4, as ATen counts) under the generator's mutex:
 * what ATen's own random kernels do, so aten_rng_get_state/set_state replay
 * the harness's kernels too. Refused during CUDA graph capture. ST_INPUT in a
 * build without CUDA, ST_INTERNAL for DEVICE_CPU or a bad increment. */
int aten_cuda_philox_reserve(int device, uint64_t increment, uint64_t *seed, uint64_t *offset);

/* ---- timing ------------------------------------------------------------ */

/* Marks on a device's timeline, and the milliseconds between two of them.
 * CPU: the monotonic clock when the mark is made. CUDA: an event recorded on
 * the device's current stream, so an interval is the device time between
 * the work queued before each mark (read with cudaEventElapsedTime; reading
 * waits for the later mark). Marks are numbered 0, 1, ... in order. */
typedef struct aten_timer aten_timer;
int aten_timer_create(aten_timer **out, int device);
int aten_timer_mark(aten_timer *t);
int aten_timer_ms(aten_timer *t, int from, int to, double *ms);
void aten_timer_free(aten_timer *t);              /* NULL is fine */

/* ---- tensor handles ---------------------------------------------------- */

int tensor_from_host(tensor **out, const struct host_tensor *src, int device);
/* Copies to host (dtype kept; made contiguous first). */
int tensor_to_host(const tensor *t, struct host_tensor *out);
/* A second handle to the same storage (like copying an at::Tensor). */
int tensor_share(tensor **out, const tensor *t);
/* 1 when this handle is the only reference to the tensor and to its storage
 * and the layout is dense, so an in-place update is seen by no one else
 * (autograd's rule for accumulating a gradient in place); else 0. */
int tensor_is_exclusive(const tensor *t);
void tensor_free(tensor *t);                  /* NULL is fine */

int tensor_ndim(const tensor *t);
int64_t tensor_size(const tensor *t, int dim); /* negative dim counts from the end */
/* Fills shape (TENSOR_MAX_DIMS) and returns ndim. */
int tensor_shape(const tensor *t, int64_t *shape);
enum dtype tensor_dtype(const tensor *t);  /* DT_COUNT for a dtype the harness lacks */
int tensor_device(const tensor *t);
size_t tensor_numel(const tensor *t);
size_t tensor_nbytes(const tensor *t);
int tensor_is_contiguous(const tensor *t);
/* Raw data pointer of a contiguous CPU tensor (NULL otherwise). The fused C
 * kernels work on it directly. */
void *tensor_data(tensor *t);
const void *tensor_data_const(const tensor *t);
/* Raw data pointer of a contiguous tensor on any device (a device address
 * for a CUDA tensor), NULL when not contiguous: for the CUDA kernels. */
void *tensor_raw_data(tensor *t);
const void *tensor_raw_data_const(const tensor *t);
/* Identity of the storage, to tell whether two handles alias. */
const void *tensor_storage_id(const tensor *t);
/* The version counter of t's storage (PyTorch's t._version): every in-place
 * op through the shim bumps it; -1 on error. Saved-tensor checks use it. */
int64_t tensor_version(const tensor *t);

/* ---- factories ------------------------------------------------------- */

int tensor_empty(tensor **out, enum dtype dt, int ndim, const int64_t *shape, int device);
int tensor_zeros(tensor **out, enum dtype dt, int ndim, const int64_t *shape, int device);
int tensor_zeros_like(tensor **out, const tensor *like);
int tensor_full(tensor **out, enum dtype dt, int ndim, const int64_t *shape, int device, double value);
/* Normal(0, std) and Uniform(lo, hi) from the device's default generator. */
int tensor_randn(tensor **out, enum dtype dt, int ndim, const int64_t *shape, int device, double std);
int tensor_uniform(tensor **out, enum dtype dt, int ndim, const int64_t *shape, int device,
                   double lo, double hi);
/* Random class indices in [0, classes) (int64), default generator. */
int tensor_randint(tensor **out, int64_t classes, int ndim, const int64_t *shape, int device);

/* ---- shape and type -------------------------------------------------- */

int tensor_reshape(tensor **out, const tensor *t, int ndim, const int64_t *shape);
int tensor_transpose(tensor **out, const tensor *t, int dim0, int dim1);
int tensor_contiguous(tensor **out, const tensor *t);
int tensor_clone(tensor **out, const tensor *t);
int tensor_to_dtype(tensor **out, const tensor *t, enum dtype dt);
int tensor_to_device(tensor **out, const tensor *t, int device);
/* out = t[..., start:start+len] along dim (a view). */
int tensor_narrow(tensor **out, const tensor *t, int dim, int64_t start, int64_t len);
/* Concatenate along dim. */
int tensor_cat(tensor **out, const tensor *const *ts, int n, int dim);

/* ---- arithmetic (ATen kernels; broadcasting as ATen does) ------------- */

int tensor_add(tensor **out, const tensor *a, const tensor *b);
/* a + alpha * b */
int tensor_add_scaled(tensor **out, const tensor *a, const tensor *b, double alpha);
int tensor_sub(tensor **out, const tensor *a, const tensor *b);
int tensor_mul(tensor **out, const tensor *a, const tensor *b);
int tensor_div(tensor **out, const tensor *a, const tensor *b);
int tensor_mul_scalar(tensor **out, const tensor *a, double s);
/* a / s with ATen's scalar division (not a multiplication by 1/s: the two
 * round differently, and dropout and attention must match ATen bitwise). */
int tensor_div_scalar(tensor **out, const tensor *a, double s);
/* In place a /= s, the same scalar division: dropout's noise.div_(1 - p). */
int tensor_div_scalar_(tensor *a, double s);
/* In place a += b (gradient accumulation and SGD use it). */
int tensor_add_(tensor *a, const tensor *b, double alpha);
int tensor_copy_(tensor *dst, const tensor *src);
int tensor_fill_(tensor *t, double value);
/* In place, flips the lowest mantissa bit of every finite, nonzero element
 * of a float32, bfloat16 or float16 tensor (zeros, infinities and NaNs keep
 * their bits): a one-ULP perturbation made with ATen ops on the tensor's own
 * device (xor on an integer view of its bits), so it works on a CUDA tensor
 * and on a non-contiguous view alike. ST_INTERNAL for other dtypes. The
 * planted bug first_call_kernel uses it. */
int tensor_flip_last_bit_(tensor *t);
/* Sum over dims (keepdim 0/1). */
int tensor_sum_dims(tensor **out, const tensor *t, const int64_t *dims, int ndims, int keepdim);
int tensor_sum_all(tensor **out, const tensor *t);
/* Sum t down to `shape` (reverse of broadcasting), like autograd's sum_to. */
int tensor_sum_to(tensor **out, const tensor *t, int ndim, const int64_t *shape);
int tensor_mean_all(tensor **out, const tensor *t);
double tensor_item(const tensor *t); /* a one-element tensor as double (NaN on error) */
/* Bitwise equality of dtype, shape and bytes. */
int tensor_bitwise_equal(const tensor *a, const tensor *b);

/* ---- neural-network ops (forward and backward kernels) ----------------- */

/* y = x · wᵀ + b (b may be NULL): at::linear. */
int tensor_linear(tensor **out, const tensor *x, const tensor *w, const tensor *b);
/* at::matmul with the usual batching. */
int tensor_matmul(tensor **out, const tensor *a, const tensor *b);
int tensor_gelu(tensor **out, const tensor *x, int tanh_approx);
int tensor_gelu_backward(tensor **out, const tensor *grad, const tensor *x, int tanh_approx);
/* A 0/1 mask of x's shape and dtype: bernoulli_(p_keep) from the default
 * generator of x's device — exactly what ATen's CPU dropout draws. */
int tensor_bernoulli(tensor **out, const tensor *like, double p_keep);
/* at::native_layer_norm over the last dim: out, mean, rstd. w, b may be NULL. */
int tensor_layer_norm(tensor **out, tensor **mean, tensor **rstd, const tensor *x,
                      const tensor *w, const tensor *b, double eps);
/* dx, dw, db (any may be NULL when not wanted). */
int tensor_layer_norm_backward(tensor **dx, tensor **dw, tensor **db, const tensor *grad,
                               const tensor *x, const tensor *mean, const tensor *rstd,
                               const tensor *w, const tensor *b);
int tensor_softmax(tensor **out, const tensor *x, int dim);
int tensor_softmax_backward(tensor **out, const tensor *grad, const tensor *y, int dim,
                            enum dtype input_dtype);
/* Fills entries above the diagonal of the last two dims with value (-inf for
 * causal attention). */
int tensor_causal_fill(tensor **out, const tensor *scores, double value);
/* Same mask applied to a gradient (zeros above the diagonal). */
int tensor_causal_zero(tensor **out, const tensor *grad);
/* mean((x - t)^2) as at::mse_loss, and its backward. */
int tensor_mse_loss(tensor **out, const tensor *x, const tensor *target);
int tensor_mse_loss_backward(tensor **out, const tensor *grad, const tensor *x, const tensor *target);
/* Cross entropy over the last dim with int64 class targets, mean reduction:
 * log_softmax + nll_loss. Returns the loss and the log-probabilities
 * (saved for backward). */
int tensor_cross_entropy(tensor **loss, tensor **logp, const tensor *logits, const tensor *target);
int tensor_cross_entropy_backward(tensor **out, const tensor *grad, const tensor *logp,
                                  const tensor *target);
/* RReLU in training mode through ATen: random slopes drawn into noise from
 * the default generator; backward uses the saved noise. */
int tensor_rrelu(tensor **out, tensor **noise, const tensor *x, double lower, double upper);
int tensor_rrelu_backward(tensor **out, const tensor *grad, const tensor *x, const tensor *noise,
                          double lower, double upper);
/* Batch norm in training mode over dim 0 of a 2-d x [N, C], as
 * at::native_batch_norm: out, and the batch mean and inverse std it saves;
 * running_mean and running_var (may be NULL) are updated in place with
 * `momentum` (unbiased variance), as nn.BatchNorm1d does in training. */
int tensor_batch_norm_train(tensor **out, tensor **save_mean, tensor **save_invstd, const tensor *x,
                            const tensor *w, const tensor *b, tensor *running_mean, tensor *running_var,
                            double momentum, double eps);
/* dx, dw, db (any may be NULL when not wanted). */
int tensor_batch_norm_train_backward(tensor **dx, tensor **dw, tensor **db, const tensor *grad, const tensor *x,
                                     const tensor *w, const tensor *save_mean, const tensor *save_invstd,
                                     double eps);
/* Fake quantisation with a per-tensor scale (a one-element float32
 * tensor): (x·scale clamped to ±fp_max, rounded to bfloat16) / scale,
 * computed in float32, returned in x's dtype. */
int tensor_fake_quantize(tensor **out, const tensor *x, const tensor *scale, double fp_max);
/* Delayed scaling, once per forward: history (float32 [H]) shifts by one
 * and takes max|x| at index 0; scale (float32 [1]) becomes fp_max / max(history)
 * when that max is positive, else stays. Both in place. */
int tensor_delayed_scaling_update_(tensor *history, tensor *scale, const tensor *x, double fp_max);

#ifdef __cplusplus
}
#endif
#endif
