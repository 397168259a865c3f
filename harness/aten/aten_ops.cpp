/* aten_ops.cpp: the ops of aten.h's C API: arithmetic, reductions, bitwise
 * comparison, and the neural-network ops with their backward kernels. Every
 * entry point runs its body through shim::guarded (shim.hpp), so no C++
 * exception reaches C.
 *
 * Ops call the very ATen kernels torch autograd calls for the same op
 * (native_layer_norm, _softmax_backward_data, nll_loss_backward, ...), so on
 * one device the harness's gradients can be bitwise equal to torch's.
 * Tensors made here never require grad, so ATen records no autograd graph for
 * them; only oracle.cpp builds graphs, on detached copies. */
#include "shim.hpp"

#include <array>
#include <cstring>
#include <tuple>

using shim::dims;
using shim::give_all;
using shim::guarded;
using shim::guarded_or;
using shim::produce;
using shim::ref;
using shim::shim_error;
using shim::to_scalar_type;

namespace {

/* An optional tensor argument (b, w) from a maybe-NULL handle. */
c10::optional<at::Tensor> opt(const tensor *h)
{
    c10::optional<at::Tensor> o;
    if (h)
        o = h->t;
    return o;
}

void null_outs(std::initializer_list<tensor **> outs)
{
    for (tensor **o : outs)
        if (o)
            *o = nullptr;
}

/* Entries above the diagonal of the last two dims (j > i): the future
 * positions causal attention must not see. */
at::Tensor causal_mask(const at::Tensor &s)
{
    if (s.dim() < 2)
        throw shim_error(ST_INTERNAL, "causal mask needs at least 2 dims, got " +
                                          std::to_string(s.dim()));
    return at::ones({s.size(-2), s.size(-1)}, s.options().dtype(at::kBool)).triu(1);
}

/* The classes dim last, flattened to the [N, C] / [N] that nll_loss takes. */
at::Tensor rows(const at::Tensor &logits) { return logits.reshape({-1, logits.size(-1)}); }

} // namespace

/* ======================================================================
 * arithmetic
 * ==================================================================== */

int tensor_add(tensor **out, const tensor *a, const tensor *b)
{
    return produce(__func__, out, [&] { return at::add(ref(a), ref(b)); });
}

int tensor_add_scaled(tensor **out, const tensor *a, const tensor *b, double alpha)
{
    return produce(__func__, out, [&] { return at::add(ref(a), ref(b), alpha); });
}

int tensor_sub(tensor **out, const tensor *a, const tensor *b)
{
    return produce(__func__, out, [&] { return at::sub(ref(a), ref(b)); });
}

int tensor_mul(tensor **out, const tensor *a, const tensor *b)
{
    return produce(__func__, out, [&] { return at::mul(ref(a), ref(b)); });
}

int tensor_div(tensor **out, const tensor *a, const tensor *b)
{
    return produce(__func__, out, [&] { return at::div(ref(a), ref(b)); });
}

int tensor_mul_scalar(tensor **out, const tensor *a, double s)
{
    return produce(__func__, out, [&] { return at::mul(ref(a), at::Scalar(s)); });
}

int tensor_div_scalar(tensor **out, const tensor *a, double s)
{
    return produce(__func__, out, [&] { return at::div(ref(a), at::Scalar(s)); });
}

int tensor_div_scalar_(tensor *a, double s)
{
    return guarded(__func__, [&] {
        if (!a)
            throw shim_error(ST_INTERNAL, "NULL tensor handle");
        a->t.div_(at::Scalar(s));
        return (int)ST_OK;
    });
}

int tensor_is_exclusive(const tensor *t)
{
    if (!t || !t->t.defined() || !t->t.has_storage())
        return 0;
    return t->t.use_count() == 1 && t->t.storage().use_count() == 1 && t->t.is_non_overlapping_and_dense();
}

int tensor_add_(tensor *a, const tensor *b, double alpha)
{
    return guarded(__func__, [&] {
        if (!a)
            throw shim_error(ST_INTERNAL, "NULL tensor handle");
        a->t.add_(ref(b), alpha);
        return (int)ST_OK;
    });
}

int tensor_copy_(tensor *dst, const tensor *src)
{
    return guarded(__func__, [&] {
        if (!dst)
            throw shim_error(ST_INTERNAL, "NULL tensor handle");
        dst->t.copy_(ref(src));
        return (int)ST_OK;
    });
}

int tensor_fill_(tensor *t, double value)
{
    return guarded(__func__, [&] {
        if (!t)
            throw shim_error(ST_INTERNAL, "NULL tensor handle");
        t->t.fill_(value);
        return (int)ST_OK;
    });
}

int tensor_flip_last_bit_(tensor *t)
{
    return guarded(__func__, [&] {
        if (!t)
            throw shim_error(ST_INTERNAL, "NULL tensor handle");
        at::Tensor &x = t->t;
        at::ScalarType bits;
        switch (x.scalar_type()) {
        case at::kFloat: bits = at::kInt; break;
        case at::kBFloat16:
        case at::kHalf: bits = at::kShort; break;
        default: throw shim_error(ST_INTERNAL, "not a float32, bfloat16 or float16 tensor");
        }
        /* ne(0) is false for both zeros; isfinite for infinities and NaNs. */
        at::Tensor flip = at::isfinite(x).logical_and_(x.ne(0)).to(bits);
        x.view(bits).bitwise_xor_(flip);
        return (int)ST_OK;
    });
}

int tensor_sum_dims(tensor **out, const tensor *t, const int64_t *dims_, int ndims, int keepdim)
{
    return produce(__func__, out, [&] {
        if (ndims <= 0 || !dims_)
            throw shim_error(ST_INTERNAL, "sum over no dims (use tensor_sum_all)");
        return at::sum(ref(t), at::IntArrayRef(dims_, (size_t)ndims), keepdim != 0);
    });
}

int tensor_sum_all(tensor **out, const tensor *t)
{
    return produce(__func__, out, [&] { return ref(t).sum(); });
}

int tensor_sum_to(tensor **out, const tensor *t, int ndim, const int64_t *shape)
{
    /* at::sum_to is what autograd uses to undo broadcasting; it may return t
     * itself when the shapes already match (the handle then shares storage). */
    return produce(__func__, out, [&] { return at::sum_to(ref(t), dims(ndim, shape)); });
}

int tensor_mean_all(tensor **out, const tensor *t)
{
    return produce(__func__, out, [&] { return ref(t).mean(); });
}

double tensor_item(const tensor *t)
{
    return guarded_or(__func__, (double)NAN, [&] { return ref(t).item<double>(); });
}

int tensor_bitwise_equal(const tensor *a, const tensor *b)
{
    /* 0 on an error (with the message set), so `if (equal)` stays safe. */
    return guarded_or(__func__, 0, [&] {
        const at::Tensor &x = ref(a), &y = ref(b);
        if (x.scalar_type() != y.scalar_type() || !x.sizes().equals(y.sizes()))
            return 0;
        /* Bytes, not at::equal: NaN payloads and -0.0 must count. */
        at::Tensor cx = x.to(at::kCPU).contiguous(), cy = y.to(at::kCPU).contiguous();
        size_t n = cx.nbytes();
        return n == 0 || memcmp(cx.data_ptr(), cy.data_ptr(), n) == 0 ? 1 : 0;
    });
}

/* ======================================================================
 * neural-network ops
 * ==================================================================== */

int tensor_linear(tensor **out, const tensor *x, const tensor *w, const tensor *b)
{
    return produce(__func__, out, [&] { return at::linear(ref(x), ref(w), opt(b)); });
}

int tensor_matmul(tensor **out, const tensor *a, const tensor *b)
{
    return produce(__func__, out, [&] { return at::matmul(ref(a), ref(b)); });
}

static const char *gelu_mode(int tanh_approx) { return tanh_approx ? "tanh" : "none"; }

int tensor_gelu(tensor **out, const tensor *x, int tanh_approx)
{
    return produce(__func__, out, [&] { return at::gelu(ref(x), gelu_mode(tanh_approx)); });
}

int tensor_gelu_backward(tensor **out, const tensor *grad, const tensor *x, int tanh_approx)
{
    return produce(__func__, out,
                   [&] { return at::gelu_backward(ref(grad), ref(x), gelu_mode(tanh_approx)); });
}

int tensor_bernoulli(tensor **out, const tensor *like, double p_keep)
{
    /* Exactly the draw of ATen's CPU dropout. at::dropout on CPU (F.dropout in
     * training mode) is _dropout_impl in aten/src/ATen/native/Dropout.cpp, the
     * same in 1.13 and 2.x:
     *     noise = at::empty_like(input, LEGACY_CONTIGUOUS_MEMORY_FORMAT);
     *     noise.bernoulli_(1 - p);  noise.div_(1 - p);  return input * noise;
     * So a dropout built as x * (mask / p_keep) -- divide the mask first, in
     * x's dtype -- is bitwise equal to F.dropout from the same generator
     * state. Not on CUDA: there F.dropout takes the fused native_dropout
     * kernel (a bool mask, a different draw). Note torch draws nothing when
     * p == 0 or p == 1 (and for an empty input); callers must skip the draw
     * in those cases too to keep the stream in step. */
    return produce(__func__, out, [&] {
        return at::empty_like(ref(like), at::MemoryFormat::Contiguous).bernoulli_(p_keep);
    });
}

int tensor_layer_norm(tensor **out, tensor **mean, tensor **rstd, const tensor *x,
                      const tensor *w, const tensor *b, double eps)
{
    null_outs({out, mean, rstd});
    return guarded(__func__, [&] {
        if (!out)
            throw shim_error(ST_INTERNAL, "NULL output pointer");
        const at::Tensor &xt = ref(x);
        std::array<int64_t, 1> normalized{xt.size(-1)};
        auto r = at::native_layer_norm(xt, normalized, opt(w), opt(b), eps);
        return give_all({{out, std::get<0>(r)}, {mean, std::get<1>(r)}, {rstd, std::get<2>(r)}});
    });
}

int tensor_layer_norm_backward(tensor **dx, tensor **dw, tensor **db, const tensor *grad,
                               const tensor *x, const tensor *mean, const tensor *rstd,
                               const tensor *w, const tensor *b)
{
    null_outs({dx, dw, db});
    return guarded(__func__, [&] {
        const at::Tensor &xt = ref(x);
        std::array<int64_t, 1> normalized{xt.size(-1)};
        std::array<bool, 3> mask{dx != nullptr, dw != nullptr && w != nullptr,
                                 db != nullptr && b != nullptr};
        auto r = at::native_layer_norm_backward(ref(grad), xt, normalized, ref(mean), ref(rstd),
                                                opt(w), opt(b), mask);
        return give_all({{dx, std::get<0>(r)}, {dw, std::get<1>(r)}, {db, std::get<2>(r)}});
    });
}

int tensor_softmax(tensor **out, const tensor *x, int dim)
{
    return produce(__func__, out, [&] { return at::_softmax(ref(x), dim, false); });
}

int tensor_softmax_backward(tensor **out, const tensor *grad, const tensor *y, int dim,
                            enum dtype input_dtype)
{
    return produce(__func__, out, [&] {
        return at::_softmax_backward_data(ref(grad), ref(y), dim, to_scalar_type(input_dtype));
    });
}

int tensor_causal_fill(tensor **out, const tensor *scores, double value)
{
    return produce(__func__, out, [&] {
        const at::Tensor &s = ref(scores);
        return s.masked_fill(causal_mask(s), value);
    });
}

int tensor_causal_zero(tensor **out, const tensor *grad)
{
    return produce(__func__, out, [&] {
        const at::Tensor &g = ref(grad);
        return g.masked_fill(causal_mask(g), 0.0);
    });
}

int tensor_mse_loss(tensor **out, const tensor *x, const tensor *target)
{
    return produce(__func__, out,
                   [&] { return at::mse_loss(ref(x), ref(target), at::Reduction::Mean); });
}

int tensor_mse_loss_backward(tensor **out, const tensor *grad, const tensor *x,
                             const tensor *target)
{
    return produce(__func__, out, [&] {
        return at::mse_loss_backward(ref(grad), ref(x), ref(target), at::Reduction::Mean);
    });
}

/* F.cross_entropy with class-index targets is nll_loss(log_softmax(x, 1), t)
 * on [N, C]; its backward is nll_loss_backward then _log_softmax_backward_data,
 * the kernels below. ignore_index is torch's default, -100. */
static const int64_t k_ignore_index = -100;

int tensor_cross_entropy(tensor **loss, tensor **logp, const tensor *logits, const tensor *target)
{
    null_outs({loss, logp});
    return guarded(__func__, [&] {
        if (!loss)
            throw shim_error(ST_INTERNAL, "NULL output pointer");
        const at::Tensor &x = ref(logits);
        at::Tensor lp = at::log_softmax(rows(x), 1);
        at::Tensor l = at::nll_loss(lp, ref(target).reshape({-1}), {}, at::Reduction::Mean,
                                    k_ignore_index);
        return give_all({{loss, l}, {logp, lp.view(x.sizes())}});
    });
}

int tensor_cross_entropy_backward(tensor **out, const tensor *grad, const tensor *logp,
                                  const tensor *target)
{
    return produce(__func__, out, [&] {
        const at::Tensor &lp_in = ref(logp);
        at::Tensor lp = rows(lp_in);
        at::Tensor t = ref(target).reshape({-1});
        /* total_weight is what nll_loss's forward saved for autograd (the
         * count of non-ignored targets, in the logits' dtype); recomputing it
         * with the forward kernel gives the very same value. */
        at::Tensor total_weight =
            std::get<1>(at::nll_loss_forward(lp, t, {}, at::Reduction::Mean, k_ignore_index));
        at::Tensor dlp = at::nll_loss_backward(ref(grad), lp, t, {}, at::Reduction::Mean,
                                               k_ignore_index, total_weight);
        return at::_log_softmax_backward_data(dlp, lp, 1, lp.scalar_type()).view(lp_in.sizes());
    });
}

int tensor_rrelu(tensor **out, tensor **noise, const tensor *x, double lower, double upper)
{
    null_outs({out, noise});
    return guarded(__func__, [&] {
        if (!out)
            throw shim_error(ST_INTERNAL, "NULL output pointer");
        const at::Tensor &xt = ref(x);
        /* As at::rrelu (F.rrelu) does: a fresh contiguous noise buffer that
         * the kernel fills with the slopes it drew (1 where x > 0). */
        at::Tensor n = at::empty_like(xt, at::MemoryFormat::Contiguous);
        at::Tensor y = at::rrelu_with_noise(xt, n, lower, upper, true, c10::nullopt);
        return give_all({{out, y}, {noise, n}});
    });
}

int tensor_rrelu_backward(tensor **out, const tensor *grad, const tensor *x, const tensor *noise,
                          double lower, double upper)
{
    return produce(__func__, out, [&] {
        return at::rrelu_with_noise_backward(ref(grad), ref(x), ref(noise), lower, upper, true,
                                             false);
    });
}

int tensor_batch_norm_train(tensor **out, tensor **save_mean, tensor **save_invstd, const tensor *x,
                            const tensor *w, const tensor *b, tensor *running_mean, tensor *running_var,
                            double momentum, double eps)
{
    null_outs({out, save_mean, save_invstd});
    return guarded(__func__, [&] {
        if (!out)
            throw shim_error(ST_INTERNAL, "NULL output pointer");
        c10::optional<at::Tensor> rm, rv;
        if (running_mean)
            rm = running_mean->t;
        if (running_var)
            rv = running_var->t;
        auto r = at::native_batch_norm(ref(x), opt(w), opt(b), rm, rv, true, momentum, eps);
        return give_all({{out, std::get<0>(r)}, {save_mean, std::get<1>(r)}, {save_invstd, std::get<2>(r)}});
    });
}

int tensor_batch_norm_train_backward(tensor **dx, tensor **dw, tensor **db, const tensor *grad, const tensor *x,
                                     const tensor *w, const tensor *save_mean, const tensor *save_invstd,
                                     double eps)
{
    null_outs({dx, dw, db});
    return guarded(__func__, [&] {
        std::array<bool, 3> mask{dx != nullptr, dw != nullptr && w != nullptr, db != nullptr};
        auto r = at::native_batch_norm_backward(ref(grad), ref(x), opt(w), c10::nullopt, c10::nullopt,
                                                opt(save_mean), opt(save_invstd), true, eps, mask);
        return give_all({{dx, std::get<0>(r)}, {dw, std::get<1>(r)}, {db, std::get<2>(r)}});
    });
}

int tensor_fake_quantize(tensor **out, const tensor *x, const tensor *scale, double fp_max)
{
    return produce(__func__, out, [&] {
        const at::Tensor &xt = ref(x), &s = ref(scale);
        at::Tensor q = (xt.to(at::kFloat) * s).clamp(-fp_max, fp_max).to(at::kBFloat16).to(at::kFloat);
        return (q / s).to(xt.scalar_type());
    });
}

int tensor_delayed_scaling_update_(tensor *history, tensor *scale, const tensor *x, double fp_max)
{
    return guarded(__func__, [&] {
        if (!history || !scale)
            throw shim_error(ST_INTERNAL, "NULL tensor handle");
        at::Tensor &h = history->t, &s = scale->t;
        at::Tensor amax = ref(x).abs().max().to(at::kFloat).reshape({1});
        at::Tensor shifted = at::cat({amax, h.narrow(0, 0, h.size(0) - 1)});
        h.copy_(shifted);
        at::Tensor m = h.max();
        /* a true division (Python's 448.0 / m would multiply by a reciprocal) */
        s.copy_(at::where(m > 0, at::full_like(m, fp_max).div(m), s));
        return (int)ST_OK;
    });
}
