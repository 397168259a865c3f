/* reentrant: torch.utils.checkpoint with use_reentrant=True
 * (CheckpointFunction). Forward runs the segment with grad disabled and
 * saves only its input; the node's backward replays RNG and autocast under a
 * forked RNG, recomputes with grad enabled on a fresh graph, and runs a
 * nested backward through it: parameters get their gradients from that
 * nested pass, the input's gradient is handed back to the outer one.
 * Like PyTorch it refuses a partial backward (grad() or backward(inputs=)),
 * and warns when no input requires grad (parameters then get no gradient). */
#include <stdio.h>
#include <stdlib.h>

#include "../harness/error.h"
#include "checkpoint_env.h"
#include "impl.h"

struct reentrant_ctx {
    struct checkpoint_env env;
    struct segment_fn seg;
    int input_requires_grad;
};

static void reentrant_ctx_free(void *p)
{
    struct reentrant_ctx *c = p;
    checkpoint_env_free(&c->env);
    free(c);
}

/* hook_fires_twice: the nested backward as two passes over halves of the
 * upstream gradient, the first retaining the recompute graph. Halving is
 * exact, so the gradients sum to the same bits where nothing accumulated
 * before; every parameter of the segment accumulates twice. */
static int backward_per_half(struct var *out, const tensor *g)
{
    tensor *half;
    int st = tensor_mul_scalar(&half, g, 0.5);
    if (st)
        return st;
    struct backward_options retain = {.retain_graph = 1};
    st = tape_backward_with(&out, &half, 1, &retain);
    if (!st)
        st = tape_backward(&out, &half, 1);
    tensor_free(half);
    return st;
}

static int reentrant_backward(struct node *n, tensor *const *g, tensor **gi)
{
    struct reentrant_ctx *c = n->ctx;
    if (tape_engine_is_partial())
        return error_set(ST_RUN, "reentrant checkpoint is not compatible with grad() or backward(inputs=...): "
                                 "use a full backward");
    tensor *saved_input;
    int st = node_saved(n, 0, &saved_input);
    if (st)
        return st;
    struct var *detached = NULL, *out = NULL;
    /* The recompute starts from a leaf cut from the outer graph, so the
     * nested backward stops there and leaves its gradient in ->grad. */
    st = var_leaf(&detached, saved_input, c->input_requires_grad, "checkpoint.input");
    if (st)
        return st;
    struct recompute_frame frame;
    st = checkpoint_env_enter(&c->env, &frame);
    if (!st)
        st = c->seg.call(c->seg.ctx, detached, &out);
    int exit_st = checkpoint_env_exit(&c->env, &frame);
    if (!st)
        st = exit_st;
    if (st)
        goto out;
    if (!out->requires_grad) {
        st = error_set(ST_RUN, "checkpoint: no output of the segment requires grad; the checkpoint is not needed");
        goto out;
    }
    if ((st = c->env.mutation->backward_per_half ? backward_per_half(out, g[0]) : tape_backward(&out, g, 1)))
        goto out;
    if (n->next[0].node && detached->grad)
        st = tensor_share(&gi[0], detached->grad);
out:
    var_release(out);
    var_release(detached);
    return st;
}

int impl_run_reentrant(const struct checkpoint_impl *impl, const struct impl_options *opts,
                       const struct segment_fn *seg, struct var *in, struct var **out)
{
    if (opts->determinism_check == DETERMINISM_VALUES)
        return error_set(ST_INPUT, "impl %s is reentrant: it keeps no saved tensors to compare, so determinism_check = "
                                   "values (verify_values) is not supported; use nonreentrant",
                         impl->name);
    struct reentrant_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return error_set(ST_RUN, "out of memory creating a checkpoint");
    c->seg = *seg;
    c->input_requires_grad = in->requires_grad;
    if (!in->requires_grad && opts->stats) {
        opts->stats->warnings++;
        snprintf(opts->stats->warning, sizeof opts->stats->warning,
                 "reentrant checkpoint: none of the inputs requires grad; gradients of the segment's "
                 "parameters will be missing");
    }
    int st = checkpoint_env_capture(&c->env, impl, opts, in);
    if (st) {
        reentrant_ctx_free(c);
        return st;
    }
    if (opts->context && opts->context->forward_enter)
        opts->context->forward_enter(opts->context->ctx);
    struct var *plain = NULL;
    int grad_mode = grad_mode_set(0);
    st = seg->call(seg->ctx, in, &plain);
    grad_mode_set(grad_mode);
    if (opts->context && opts->context->forward_exit)
        opts->context->forward_exit(opts->context->ctx);
    if (!st && (st = checkpoint_env_check_forward(&c->env)))
        var_release(plain);
    if (st) {
        reentrant_ctx_free(c);
        return st;
    }
    tensor *y = NULL;
    st = tensor_share(&y, plain->data);
    var_release(plain);
    if (st) {
        reentrant_ctx_free(c);
        return st;
    }
    struct node *n = NULL;
    if (tape_should_record(&in, 1)) {
        if ((st = node_create(&n, "checkpoint_reentrant", reentrant_backward, &in, 1, 1))) {
            reentrant_ctx_free(c);
            tensor_free(y);
            return st;
        }
        n->ctx = c;
        n->ctx_free = reentrant_ctx_free;
        if ((st = node_save(n, in->data))) {
            node_release(n);
            tensor_free(y);
            return st;
        }
    } else {
        reentrant_ctx_free(c);
    }
    st = var_from_op(out, y, n, 0);
    node_release(n);
    return st;
}
