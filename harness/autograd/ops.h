/* ops: the differentiable ops of the harness's models. Each has a forward
 * (ATen kernels through the shim, or the harness's own fused C kernel), a
 * backward written out explicitly, and a declared list of what it saves for
 * backward (saved through the tape's hook stack, so checkpoints see every
 * saved tensor). Every op returns a status; *out is a new var reference.
 * Autocast rules: see autocast.h. */
#ifndef CKPT_OPS_H
#define CKPT_OPS_H

#include "tape.h"

enum fused_variant {
    FUSED_DETERMINISTIC = 0, /* dbias summed over rows in row order */
    FUSED_ATOMIC,            /* dbias by atomic adds from several threads */
};

/* Saves: x, w (both after autocast casts). y = x·wᵀ + b (b may be NULL). */
int op_linear(struct var **out, struct var *x, struct var *w, struct var *b);
/* Saves: x. Exact erf GELU or the tanh approximation. */
int op_gelu(struct var **out, struct var *x, int tanh_approx);
/* Saves: nothing. a + b with broadcasting (residual add, bias add). */
int op_add(struct var **out, struct var *a, struct var *b);
/* Saves: nothing. x · s for a number s (ATen's mul by a scalar, as torch's
 * `x * s`); backward: g · s. */
int op_scale(struct var **out, struct var *x, double s);
/* Unfused bias+GELU: op_add then op_gelu(tanh) — two ATen kernels.
 * Saves: (x + b) for the gelu. */
int op_bias_gelu_unfused(struct var **out, struct var *x, struct var *b);
/* Fused bias+GELU (tanh) in one pass: the harness's own kernel, C on the
 * CPU, CUDA on a CUDA device (CUDA builds; harness/cuda/).
 * Saves: x, b. Backward: dx, and dbias reduced as `variant` says. */
int op_bias_gelu_fused(struct var **out, struct var *x, struct var *b, enum fused_variant variant);
/* Dropout from the default generator of x's device, exactly as ATen's CPU
 * dropout draws (bernoulli(1 - p) mask, scaled by 1/(1 - p)).
 * Saves: the scaled mask. p = 0 draws nothing and returns x itself. */
int op_dropout(struct var **out, struct var *x, double p);
/* Fused residual + dropout(x + b): one node. On a CUDA device one kernel
 * whose Philox mask comes from the device's default generator
 * (harness/cuda/bias_dropout_add_cuda.h). Saves: the scaled mask. */
int op_bias_dropout_add(struct var **out, struct var *x, struct var *b, struct var *residual, double p);
/* Layer norm over the last dim (float32 under autocast). Saves: x, mean,
 * rstd, w, b. */
int op_layer_norm(struct var **out, struct var *x, struct var *w, struct var *b, double eps);
/* Causal multi-head softmax attention on a fused projection:
 * qkv [B, T, 3C] → [B, T, C], heads H, d = C / H; scores q·kᵀ / sqrt(d),
 * causal mask, softmax (float32 under autocast), ·v. Saves: q, k, v, probs. */
int op_causal_attention(struct var **out, struct var *qkv, int heads);
/* mean((x - target)^2) (float32 under autocast). Saves: x, target. */
int op_mse_loss(struct var **out, struct var *x, struct var *target);
/* Mean cross entropy over the last dim, int64 class targets (float32 under
 * autocast). Saves: log-probabilities, target. */
int op_cross_entropy(struct var **out, struct var *logits, struct var *target);
/* RReLU in training mode (random slopes from the default generator).
 * Saves: x, noise. */
int op_rrelu(struct var **out, struct var *x, double lower, double upper);
/* Batch norm in training mode over every position of x [batch, seq, C]
 * (nn.BatchNorm1d on x viewed as [batch·seq, C]): running_mean and
 * running_var (buffers, outside the graph) are updated in place with
 * `momentum`. Saves: x, w, the batch mean and inverse std. */
int op_batch_norm(struct var **out, struct var *x, struct var *w, struct var *b, tensor *running_mean,
                  tensor *running_var, double momentum, double eps);
/* Fake quantisation with a per-tensor scale (tensor_fake_quantize; scale is
 * a buffer, outside the graph). Backward is the straight-through
 * estimator: the gradient passes unchanged. Saves: nothing. */
int op_fake_quantize(struct var **out, struct var *x, const tensor *scale, double fp_max);
/* A differentiable dtype cast (autocast inserts these). Saves: nothing. */
int op_to_dtype(struct var **out, struct var *x, enum dtype dtype);
/* A differentiable move to another device (the gradient moves back).
 * Saves: nothing. */
int op_to_device(struct var **out, struct var *x, int device);

/* The op's backward function, for tests and for impls that inspect nodes. */
const char *op_name_of(const struct node *n);

#endif
