/* reentrant: torch.utils.checkpoint with use_reentrant=True
 * (CheckpointFunction). Forward runs the segment with grad disabled and
 * saves only its tensor inputs (the tape's version counter then refuses a
 * backward after one of them changed in place); the node's backward replays
 * RNG and autocast under a forked RNG, recomputes with grad enabled on a
 * fresh graph, and runs a nested backward through it from the outputs that
 * require grad there: parameters get their gradients from that nested pass,
 * each tensor input that requires grad gets its gradient handed back to the
 * outer one, the others none. Every output of the node requires grad, as a
 * custom Function's outputs do; a gradient arriving at one the recompute
 * made without grad (no_grad, detached) is dropped, as PyTorch's
 * outputs_with_grad filter does.
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
    int n_in, n_out;
    int input_requires_grad[REGION_MAX_TENSORS];
};

static void reentrant_ctx_free(void *p)
{
    struct reentrant_ctx *c = p;
    checkpoint_env_free(&c->env);
    free(c);
}

/* The recompute's inputs: leaves cut from the outer graph, each requiring
 * grad as its forward input did, so the nested backward stops there and
 * leaves their gradients in ->grad. */
static int recompute_inputs(struct node *n, const struct reentrant_ctx *c, struct var **detached)
{
    for (int i = 0; i < c->n_in; i++) {
        tensor *saved;
        int st = node_saved(n, i, &saved);
        if (!st)
            st = var_leaf(&detached[i], saved, c->input_requires_grad[i], "checkpoint.input");
        if (st)
            return st;
    }
    return ST_OK;
}

static int reentrant_backward(struct node *n, tensor *const *g, tensor **gi)
{
    struct reentrant_ctx *c = n->ctx;
    if (tape_engine_is_partial())
        return error_set(ST_RUN, "reentrant checkpoint is not compatible with grad() or backward(inputs=...): "
                                 "use a full backward");
    struct var *detached[REGION_MAX_TENSORS] = {0}, *out[REGION_MAX_TENSORS] = {0};
    int st = recompute_inputs(n, c, detached);
    if (st)
        goto out;
    struct recompute_frame frame;
    st = checkpoint_env_enter(&c->env, &frame);
    if (!st)
        st = segment_call(&c->seg, detached, out);
    int exit_st = checkpoint_env_exit(&c->env, &frame);
    if (!st)
        st = exit_st;
    if (st)
        goto out;
    struct var *roots[REGION_MAX_TENSORS];
    tensor *root_grads[REGION_MAX_TENSORS];
    int n_roots = 0;
    for (int k = 0; k < c->n_out; k++) {
        if (!out[k]->requires_grad)
            continue;
        roots[n_roots] = out[k];
        root_grads[n_roots++] = g[k];
    }
    if (!n_roots) {
        st = error_set(ST_RUN, "checkpoint: no output of the segment requires grad; the checkpoint is not needed");
        goto out;
    }
    if ((st = c->env.services.nested_backward(roots, root_grads, n_roots)))
        goto out;
    for (int i = 0; i < c->n_in && !st; i++)
        if (n->next[i].node && detached[i]->grad)
            st = tensor_share(&gi[i], detached[i]->grad);
out:
    region_release(out, c->n_out);
    region_release(detached, c->n_in);
    return st;
}

/* The outputs of the grad-free forward, as outputs of node n (NULL: no
 * input requires grad, plain constants). */
static int wrap_outputs(struct var **plain, int n_out, struct node *n, struct var **out)
{
    int st = ST_OK;
    for (int k = 0; k < n_out && !st; k++) {
        tensor *y = NULL;
        if (!(st = tensor_share(&y, plain[k]->data)))
            st = var_from_op(&out[k], y, n, k);
    }
    if (st)
        region_release(out, n_out);
    return st;
}

int impl_run_reentrant(const struct checkpoint_impl *impl, const struct impl_options *opts,
                       const struct segment_fn *seg, struct var *const *in, struct var **out)
{
    if (opts->determinism_check == DETERMINISM_VALUES)
        return error_set(ST_INPUT, "impl %s is reentrant: it keeps no saved tensors to compare, so determinism_check = "
                                   "values (verify_values) is not supported; use nonreentrant",
                         impl->name);
    int n_in = segment_n_in(seg), n_out = segment_n_out(seg);
    if (n_in > REGION_MAX_TENSORS || n_out > REGION_MAX_TENSORS)
        return error_set(ST_INTERNAL, "a region takes at most %d tensors in and %d out", REGION_MAX_TENSORS,
                         REGION_MAX_TENSORS);
    struct reentrant_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return error_set(ST_RUN, "out of memory creating a checkpoint");
    c->seg = *seg;
    c->n_in = n_in;
    c->n_out = n_out;
    int any_requires_grad = 0;
    for (int i = 0; i < n_in; i++) {
        c->input_requires_grad[i] = in[i]->requires_grad;
        any_requires_grad |= in[i]->requires_grad;
    }
    if (!any_requires_grad && opts->stats) {
        opts->stats->warnings++;
        snprintf(opts->stats->warning, sizeof opts->stats->warning,
                 "reentrant checkpoint: none of the inputs requires grad; gradients of the segment's "
                 "parameters will be missing");
    }
    int st = checkpoint_env_capture(&c->env, impl, opts, in, n_in);
    if (st) {
        reentrant_ctx_free(c);
        return st;
    }
    if (opts->context && opts->context->forward_enter)
        opts->context->forward_enter(opts->context->ctx);
    struct var *plain[REGION_MAX_TENSORS] = {0};
    int grad_mode = grad_mode_set(0);
    st = segment_call(seg, in, plain);
    grad_mode_set(grad_mode);
    if (opts->context && opts->context->forward_exit)
        opts->context->forward_exit(opts->context->ctx);
    if (!st)
        st = checkpoint_env_check_forward(&c->env);
    struct node *n = NULL;
    if (!st && tape_should_record(in, n_in)) {
        if (!(st = node_create(&n, "checkpoint_reentrant", reentrant_backward, in, n_in, n_out))) {
            n->ctx = c;
            n->ctx_free = reentrant_ctx_free;
            c = NULL;
            for (int i = 0; i < n_in && !st; i++)
                st = node_save(n, in[i]->data);
        }
    }
    if (!st)
        st = wrap_outputs(plain, n_out, n, out);
    region_release(plain, n_out);
    node_release(n);
    if (c)
        reentrant_ctx_free(c);
    return st;
}
