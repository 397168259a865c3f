/* oracle.cpp: oracle.h over libtorch's own autograd, for the tests only.
 *
 * Each op is written the way a PyTorch user would write it -- the public
 * torch::nn::functional / torch:: ops with requires_grad leaves and
 * torch::autograd::grad -- and never with the backward kernels aten_ops.cpp
 * calls by hand, so it checks the tape's forward AND backward formulas
 * independently. (On CPU, torch's autograd formulas end in the same ATen
 * kernels, so for single ops the results are expected to be bitwise equal.)
 *
 * Inputs are detached (storage shared, never written) and made leaves; the
 * output and gradients handed back are detached, so no graph outlives a call. */
#include "oracle.h"

#include "shim.hpp"

#include <torch/csrc/autograd/autograd.h>
#include <torch/nn/functional.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace F = torch::nn::functional;
using shim::ref;
using shim::shim_error;

namespace {

using tensors = std::vector<torch::Tensor>;
using op_fn = torch::Tensor (*)(const tensors &in, const double *params);

struct oracle_op {
    const char *name;
    int min_inputs, max_inputs;
    int n_params;
    op_fn fn;
};

torch::Tensor dropout(const torch::Tensor &x, double p)
{
    return F::dropout(x, F::DropoutFuncOptions().p(p).training(true));
}

torch::Tensor gelu(const torch::Tensor &x, const char *approximate)
{
    return F::gelu(x, F::GELUFuncOptions().approximate(approximate));
}

const oracle_op k_ops[] = {
    {"linear", 2, 3, 0,
     [](const tensors &in, const double *) {
        // torch::linear is at::linear, what Python's F.linear calls (one addmm on
        // flattened 3-D input); the C++ frontend's F::linear adds the bias after
        // a matmul and rounds twice in bf16.
        return torch::linear(in[0], in[1], in.size() > 2 ? in[2] : torch::Tensor());
     }},
    {"gelu", 1, 1, 0, [](const tensors &in, const double *) { return gelu(in[0], "none"); }},
    {"gelu_tanh", 1, 1, 0, [](const tensors &in, const double *) { return gelu(in[0], "tanh"); }},
    {"bias_gelu_tanh", 2, 2, 0,
     [](const tensors &in, const double *) { return gelu(in[0] + in[1], "tanh"); }},
    {"dropout", 1, 1, 1, [](const tensors &in, const double *p) { return dropout(in[0], p[0]); }},
    {"layer_norm", 3, 3, 1,
     [](const tensors &in, const double *p) {
         return F::layer_norm(in[0], F::LayerNormFuncOptions({in[0].size(-1)})
                                         .weight(in[1])
                                         .bias(in[2])
                                         .eps(p[0]));
     }},
    {"add", 2, 2, 0, [](const tensors &in, const double *) { return in[0] + in[1]; }},
    {"scale", 1, 1, 1, [](const tensors &in, const double *p) { return in[0] * p[0]; }},
    {"bias_dropout_add", 3, 3, 1,
     [](const tensors &in, const double *p) { return in[2] + dropout(in[0] + in[1], p[0]); }},
    {"causal_attention", 3, 3, 0,
     [](const tensors &in, const double *) {
         const torch::Tensor &q = in[0], &k = in[1], &v = in[2];
         auto scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt((double)q.size(-1));
         auto future = torch::ones({scores.size(-2), scores.size(-1)},
                                   torch::TensorOptions().dtype(torch::kBool).device(q.device()))
                           .triu(1);
         scores = scores.masked_fill(future, -std::numeric_limits<double>::infinity());
         return torch::matmul(torch::softmax(scores, -1), v);
     }},
    {"mse_loss", 2, 2, 0,
     [](const tensors &in, const double *) { return F::mse_loss(in[0], in[1]); }},
    {"cross_entropy", 2, 2, 0,
     [](const tensors &in, const double *) {
         /* classes are the last dim here; F.cross_entropy wants them at dim 1 */
         return F::cross_entropy(in[0].reshape({-1, in[0].size(-1)}), in[1].reshape({-1}));
     }},
    {"rrelu", 1, 1, 2,
     [](const tensors &in, const double *p) {
         return F::rrelu(in[0], F::RReLUFuncOptions().lower(p[0]).upper(p[1]).training(true));
     }},
    {"softmax", 1, 1, 1,
     [](const tensors &in, const double *p) { return torch::softmax(in[0], (int64_t)p[0]); }},
    {"to_dtype", 1, 1, 1,
     [](const tensors &in, const double *p) {
         return in[0].to(shim::to_scalar_type((enum dtype)(int)p[0]));
     }},
};

const oracle_op &find_op(const char *name)
{
    if (name)
        for (const oracle_op &op : k_ops)
            if (strcmp(op.name, name) == 0)
                return op;
    throw shim_error(ST_INPUT, std::string("unknown oracle op '") + (name ? name : "(null)") + "'");
}

} // namespace

int oracle_run(const char *op, const tensor *const *inputs, int n_inputs, const double *params,
               int n_params, const tensor *grad_out, tensor **out, tensor **grads)
{
    if (out)
        *out = nullptr;
    if (grads)
        for (int i = 0; i < n_inputs; i++)
            grads[i] = nullptr;
    return shim::guarded(__func__, [&] {
        const oracle_op &o = find_op(op);
        if (n_inputs < o.min_inputs || n_inputs > o.max_inputs || (n_inputs > 0 && !inputs))
            throw shim_error(ST_INTERNAL, std::string(o.name) + ": takes " +
                                              std::to_string(o.min_inputs) + ".." +
                                              std::to_string(o.max_inputs) + " inputs, got " +
                                              std::to_string(n_inputs));
        if (n_params < o.n_params || (o.n_params > 0 && !params))
            throw shim_error(ST_INTERNAL, std::string(o.name) + ": needs " +
                                              std::to_string(o.n_params) + " params");
        if (!out)
            throw shim_error(ST_INTERNAL, "NULL output pointer");

        torch::AutoGradMode grad_on(true);
        tensors leaves, wrt;
        std::vector<int> wrt_index; /* leaves[wrt_index[j]] is wrt[j] */
        for (int i = 0; i < n_inputs; i++) {
            torch::Tensor leaf = ref(inputs[i]).detach();
            if (at::isFloatingType(leaf.scalar_type())) {
                leaf.requires_grad_(true);
                wrt.push_back(leaf);
                wrt_index.push_back(i);
            }
            leaves.push_back(leaf);
        }

        torch::Tensor y = o.fn(leaves, params);
        tensors dwrt;
        if (grads && !wrt.empty() && y.requires_grad()) {
            torch::Tensor g = grad_out ? ref(grad_out) : torch::ones_like(y);
            dwrt = torch::autograd::grad({y}, wrt, {g}, /*retain_graph=*/false,
                                         /*create_graph=*/false, /*allow_unused=*/true);
        }

        std::vector<std::pair<tensor **, at::Tensor>> results;
        results.emplace_back(out, y.detach());
        for (size_t j = 0; j < wrt.size() && grads; j++) {
            /* An input the output does not depend on has a zero gradient. */
            bool have = j < dwrt.size() && dwrt[j].defined();
            torch::Tensor d = have ? dwrt[j].detach() : torch::zeros_like(wrt[j]).detach();
            results.emplace_back(&grads[wrt_index[j]], d);
        }
        return shim::give_all(results);
    });
}
