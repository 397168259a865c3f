/* An example plugin (`ckpt-verify --impl-lib libckpt_example_plugin.so`):
 * a framework's own checkpoint, written against the harness's public tape
 * and shim API the way a C or C++ framework would write one, not by calling
 * the harness's reference impls.
 *
 *   example_checkpoint    recompute-in-backward (reentrant style): forward
 *                         runs the segment without grad and keeps only its
 *                         input and the RNG states of CPU and the input's
 *                         device; backward restores those states (and
 *                         puts the surrounding ones back afterwards),
 *                         recomputes with grad and runs a nested backward.
 *                         The model's buffers (opts->state) are copied in
 *                         forward and replayed in the recompute
 *                         (module_state.h), so batch-norm statistics move
 *                         once. Claims to be right: expected PASS.
 *                         Every replay goes through the services
 *                         (services.h), resolved from the impl's table.
 *   example_no_rng_replay the same with its rng_replay service replaced
 *                         by one that replays nothing: recompute draws
 *                         fresh dropout masks. A planted bug: expected
 *                         FAIL where the segment draws.
 *   example_nr_no_rng_replay
 *                         the harness's own non-reentrant reference with
 *                         that same service replaced: a plugin plants a
 *                         bug in a reference as impls/faulty/ does.
 *                         Expected FAIL where the segment draws. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "autocast.h"
#include "../../harness/error.h"
#include "../plugin.h"

struct example_ctx {
    struct segment_fn seg;
    struct checkpoint_services services; /* the impl's, resolved */
    int input_requires_grad;
    struct rng_stash forward_rng;        /* CPU and the input's device */
    struct autocast_state autocast;
    struct module_state *buffers;  /* NULL: the model has none */
    struct state_snapshot buffers_at_forward;
};

static void example_ctx_free(void *p)
{
    struct example_ctx *c = p;
    rng_stash_free(&c->forward_rng);
    state_snapshot_free(&c->buffers_at_forward);
    free(c);
}

static int example_backward(struct node *n, tensor *const *g, tensor **gi)
{
    struct example_ctx *c = n->ctx;
    tensor *saved;
    struct rng_stash surrounding = {0};
    int forked = 0;
    struct var *leaf = NULL, *out = NULL;
    int st = node_saved(n, 0, &saved);
    if (!st)
        st = var_leaf(&leaf, saved, c->input_requires_grad, "example.input");
    if (st)
        return st;
    /* The replay puts the forward's states in force and keeps the ones in
     * force before, so that the recompute's draws do not move the
     * surrounding stream. */
    if ((st = c->services.rng_replay(&c->forward_rng, &surrounding, &forked)))
        goto out;
    struct state_recompute buffers_frame;
    if (c->buffers && (st = c->services.state_replay(c->buffers, &c->buffers_at_forward, &buffers_frame)))
        goto out;
    struct autocast_state outer = autocast_get();
    c->services.autocast_replay(c->autocast);
    int grad = grad_mode_set(1);
    st = c->seg.call(c->seg.ctx, leaf, &out);
    grad_mode_set(grad);
    autocast_set(outer);
    if (c->buffers)
        module_state_recompute_exit(c->buffers, &buffers_frame);
    if (forked) {
        int put = rng_stash_restore(&surrounding);
        st = st ? st : put;
    }
    if (st || (st = tape_backward(&out, g, 1)))
        goto out;
    if (n->next[0].node && leaf->grad)
        st = tensor_share(&gi[0], leaf->grad);
out:
    rng_stash_free(&surrounding);
    var_release(out);
    var_release(leaf);
    return st;
}

/* This example handles one-tensor segments only (ABI 4 and later hand a region of
 * several tensors as arrays; see impls/reentrant.c for one that takes
 * them): a region of more is refused with a message. */
static int example_run(const struct checkpoint_impl *impl, const struct impl_options *opts,
                       const struct segment_fn *seg, struct var *const *ins, struct var **out)
{
    if (segment_n_in(seg) != 1 || segment_n_out(seg) != 1)
        return error_set(ST_RUN, "example checkpoint: only one tensor in and one out");
    struct var *in = ins[0];
    struct example_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return error_set(ST_RUN, "example checkpoint: out of memory");
    if (opts->state && opts->state->n) {
        c->buffers = opts->state;
        int st = module_state_snapshot(opts->state, &c->buffers_at_forward);
        if (st) {
            example_ctx_free(c);
            return st;
        }
    }
    c->seg = *seg;
    checkpoint_services_resolve(&c->services, impl->services);
    c->input_requires_grad = in->requires_grad;
    c->autocast = autocast_get();
    struct rng_device_set devices;
    int input_device = tensor_device(in->data);
    rng_device_set_build(&devices, &input_device, 1, opts->current_device, RNG_ARGS_ONLY);
    int st = rng_stash_capture(&c->forward_rng, &devices);
    struct var *plain = NULL;
    tensor *y = NULL;
    struct node *n = NULL;
    if (!st) {
        int grad = grad_mode_set(0);
        st = seg->call(seg->ctx, in, &plain);
        grad_mode_set(grad);
    }
    if (!st)
        st = tensor_share(&y, plain->data);
    var_release(plain);
    if (!st && tape_should_record(&in, 1)) {
        if (!(st = node_create(&n, impl->name, example_backward, &in, 1, 1))) {
            n->ctx = c;
            n->ctx_free = example_ctx_free;
            c = NULL;
            st = node_save(n, in->data);
        }
    }
    if (!st)
        st = var_from_op(out, y, n, 0);
    else
        tensor_free(y);
    node_release(n);
    if (c)
        example_ctx_free(c);
    return st;
}

static const struct checkpoint_impl example_checkpoint = {
    .name = "example_checkpoint",
    .summary = "plugin example: recompute in backward, RNG of CPU and the input's device replayed",
    .run = example_run,
    .is_reference = 1,
};

/* The planted service: nothing replayed, nothing forked. */
static int rng_replay_nothing(const struct rng_stash *forward, struct rng_stash *surrounding, int *forked)
{
    (void)forward;
    (void)surrounding;
    (void)forked;
    return ST_OK;
}

static const struct checkpoint_services no_rng_replay = {.rng_replay = rng_replay_nothing};

static const struct checkpoint_impl example_no_rng_replay = {
    .name = "example_no_rng_replay",
    .summary = "plugin example, planted: recompute draws fresh random numbers",
    .run = example_run,
    .services = &no_rng_replay,
    .is_reference = 0,
};

static const struct checkpoint_impl example_nr_no_rng_replay = {
    .name = "example_nr_no_rng_replay",
    .summary = "plugin example, planted in the harness's non-reentrant reference: no RNG replay",
    .run = impl_run_nonreentrant,
    .services = &no_rng_replay,
    .is_reference = 0,
};

static const struct checkpoint_impl *const example_impls[] = {&example_checkpoint, &example_no_rng_replay,
                                                              &example_nr_no_rng_replay};

const struct ckpt_plugin *ckpt_verify_plugin(void);

const struct ckpt_plugin *ckpt_verify_plugin(void)
{
    static const struct ckpt_plugin plugin = {
        .abi_version = CKPT_PLUGIN_ABI_VERSION,
        .impl_size = sizeof(struct checkpoint_impl),
        .name = "example",
        .n_impls = 3,
        .impls = example_impls,
    };
    return &plugin;
}
