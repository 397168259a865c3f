/* oracle: libtorch's own autograd, for the tests only. Runs one named op
 * (or a small composite) on the given inputs with torch autograd and returns
 * its output and each input's gradient for a given upstream gradient. The
 * tape's ops are checked against it. */
#ifndef CKPT_ORACLE_H
#define CKPT_ORACLE_H

#include "aten.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Ops and their inputs / params:
 *   "linear"            x, w, b            y = x·wᵀ + b
 *   "gelu" "gelu_tanh"  x
 *   "bias_gelu_tanh"    x, b               gelu_tanh(x + b)
 *   "dropout"           x         p        F.dropout(x, p, training) (default generator)
 *   "layer_norm"        x, w, b   eps      over the last dim
 *   "add"               a, b
 *   "bias_dropout_add"  x, b, r   p        r + dropout(x + b, p)
 *   "causal_attention"  q, k, v            softmax(q·kᵀ/sqrt(d) + causal mask)·v on [B, H, T, d]
 *   "mse_loss"          x, t               mean((x - t)^2)
 *   "cross_entropy"     logits, target     F.cross_entropy over the last dim (int64 target)
 *   "rrelu"             x         lo, hi   F.rrelu(x, lo, hi, training=True)
 *   "softmax"           x         dim
 *   "to_dtype"          x         dtype    x.to(dtype) (param = enum dtype)
 * grad_out may be NULL for scalar outputs (then 1). grads[i] is set to NULL
 * for inputs that are not floating point. grads NULL: forward only, no
 * backward runs (to tell which of the two this libtorch lacks a kernel for). */
int oracle_run(const char *op, const tensor *const *inputs, int n_inputs, const double *params,
               int n_params, const tensor *grad_out, tensor **out, tensor **grads);

#ifdef __cplusplus
}
#endif
#endif
