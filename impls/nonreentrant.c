/* nonreentrant: torch.utils.checkpoint with use_reentrant=False.
 * Forward runs the segment with grad as the caller has it, under a pack hook
 * that keeps a handle (an index into the checkpoint's frame, plus the saved
 * tensor's metadata and, with determinism_check = values, a fingerprint of its bytes)
 * instead of the tensor. The first unpack in a backward pass recomputes the
 * segment once (RNG and autocast replayed under a forked RNG) under an inner
 * pack hook that fills the handles in order, stops early once the last one is
 * filled (unless early_stop is off), and checks each recomputed tensor against its forward metadata
 * (and fingerprint). Each recomputed tensor is handed out by its unpack and
 * dropped by the frame at once. Works when no input requires grad. As in
 * PyTorch (one recompute per graph task), the second backward of a graph
 * kept with retain_graph recomputes again, and a grad() or
 * backward(inputs=) pass recomputes like any other.
 * Selective checkpointing (selective.c) is this with a policy: the saved
 * tensors of the ops it names are cached in forward (version counter
 * noted) and handed back as they are; the recompute fills only the other
 * handles and stops after the last of them.
 * Nested (a checkpoint inside the segment): the inner checkpoint saves its
 * inputs through this one's pack hook, like any op; unpacking them in
 * backward recomputes this checkpoint, whose recompute re-runs the inner
 * checkpoint's forward up to that save and stops there, as PyTorch's
 * nested non-reentrant checkpoints do. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../harness/error.h"
#include "policy.h"
#include "checkpoint_env.h"
#include "impl.h"
#include "saved_store.h"

struct nr_frame {
    /* First member: saved_store_retain/release find the frame from it. */
    struct saved_store store;
    int refcount;
    struct checkpoint_env env;
    struct segment_fn seg;
    /* The tensor inputs, saved for the recompute on a node of their own
     * (PyTorch's _NoopSaveInputs) through whatever saved-tensor hook is
     * active when the checkpoint starts: none at the top level, so the
     * tape keeps them and checks their version counters at unpack; the
     * enclosing checkpoint's when nested, which then recomputes them. */
    int n_in, n_out;
    struct node *input_saver;
    int input_requires_grad[REGION_MAX_TENSORS];
    enum determinism_check check;
    int early_stop;
    struct saved_hooks forward_hooks, recompute_hooks;

    int cap_handles;
    unsigned keep;              /* selective: ops whose saved tensors are kept (policy.h) */
    int recompute_end;          /* one past the last handle a recompute must fill */
    int op_calls[POP_COUNT];    /* calls so far of each op in this checkpoint's forward */
    /* the op that saved the k-th tensor of the last recompute, k <= n_handles
     * (one more than forward saved, for the op log of that mismatch) */
    const char **recompute_ops;
    int recompute_counter;
};

void saved_store_retain(struct saved_store *store) { ((struct nr_frame *)store)->refcount++; }

struct nr_handle {
    struct nr_frame *frame;
    int index;
};

static void frame_release(struct nr_frame *f)
{
    if (--f->refcount > 0)
        return;
    for (int i = 0; i < f->store.n_handles; i++) {
        if (f->store.recomputed)
            tensor_free(f->store.recomputed[i]);
        if (f->store.kept)
            tensor_free(f->store.kept[i]);
    }
    free(f->store.recomputed);
    free(f->recompute_ops);
    free(f->store.kept);
    free(f->store.meta);
    node_release(f->input_saver);
    checkpoint_env_free(&f->env);
    free(f);
}

void saved_store_release(struct saved_store *store) { frame_release((struct nr_frame *)store); }

/* FNV-1a over the tensor's bytes (host copy): cheap, and any bit flip in a
 * recomputed tensor changes it. */
static int fingerprint(const tensor *t, uint64_t *out)
{
    struct host_tensor h;
    int st = tensor_to_host(t, &h);
    if (st)
        return st;
    uint64_t hash = 1469598103934665603ull;
    const unsigned char *p = h.data;
    for (size_t i = 0, n = host_tensor_bytes(&h); i < n; i++)
        hash = (hash ^ p[i]) * 1099511628211ull;
    host_tensor_free(&h);
    *out = hash;
    return ST_OK;
}

static int grow_handles(struct nr_frame *f)
{
    if (f->store.n_handles < f->cap_handles)
        return ST_OK;
    int cap = f->cap_handles ? f->cap_handles * 2 : 16;
    struct saved_meta *meta = realloc(f->store.meta, (size_t)cap * sizeof *meta);
    if (!meta)
        return error_set(ST_RUN, "out of memory growing checkpoint handles");
    f->store.meta = meta;
    tensor **kept = realloc(f->store.kept, (size_t)cap * sizeof *kept);
    if (!kept)
        return error_set(ST_RUN, "out of memory growing checkpoint handles");
    f->store.kept = kept;
    f->cap_handles = cap;
    return ST_OK;
}

static int forward_pack(void *ctx, const struct node *n, const tensor *t, void **packed)
{
    struct nr_frame *f = ctx;
    int st = grow_handles(f);
    if (st)
        return st;
    struct nr_handle *h = malloc(sizeof *h);
    if (!h)
        return error_set(ST_RUN, "out of memory creating a checkpoint handle");
    struct saved_meta *m = &f->store.meta[f->store.n_handles];
    memset(m, 0, sizeof *m);
    m->op = n->name;
    m->ndim = tensor_shape(t, m->shape);
    m->dtype = tensor_dtype(t);
    m->device = tensor_device(t);
    m->alive = 1;
    if (f->check == DETERMINISM_VALUES && (st = fingerprint(t, &m->fingerprint))) {
        free(h);
        return st;
    }
    int op = policy_op_from_name(n->name);
    m->slot = n->n_saved;
    if (op >= 0) {
        if (m->slot == 0)
            f->op_calls[op]++;
        m->invocation = f->op_calls[op] - 1;
    }
    m->cached = f->env.services.policy_keeps(f->keep, op);
    f->store.kept[f->store.n_handles] = NULL;
    if (m->cached) {
        st = tensor_share(&f->store.kept[f->store.n_handles], t);
        m->version = tensor_version(t);
    } else {
        st = f->env.services.keep_forward(&f->store, f->store.n_handles, t);
    }
    if (st) {
        free(h);
        return st;
    }
    if (!m->cached)
        f->recompute_end = f->store.n_handles + 1;
    if (op >= 0 && f->env.stats) {
        f->env.stats->ops_packed |= POLICY_BIT(op);
        if (f->store.kept[f->store.n_handles])
            f->env.stats->ops_kept |= POLICY_BIT(op);
    }
    h->frame = f;
    h->index = f->store.n_handles++;
    f->refcount++;
    *packed = h;
    return ST_OK;
}

static void handle_free(void *ctx, void *packed)
{
    (void)ctx;
    struct nr_handle *h = packed;
    struct nr_frame *f = h->frame;
    f->store.meta[h->index].alive = 0;
    if (f->store.meta[h->index].cached) {
        /* A cached tensor lives as long as the node that saved it. */
        tensor_free(f->store.kept[h->index]);
        f->store.kept[h->index] = NULL;
    }
    if (f->store.recomputed) {
        tensor_free(f->store.recomputed[h->index]);
        f->store.recomputed[h->index] = NULL;
    }
    free(h);
    frame_release(f);
}

/* PyTorch's checkpoint(debug=True) log, for a failed check: one row per
 * saved tensor, the op that saved it in forward and in recompute, up to the
 * first row where they differ or the row the check failed on (`failed`),
 * whichever comes first; that row is marked with `what`. Goes to the run's
 * op_log (stats), since the error message stays one line. */
static void write_op_log(const struct nr_frame *f, int failed, const char *what)
{
    if (!f->env.stats)
        return;
    char *log = f->env.stats->op_log;
    size_t cap = sizeof f->env.stats->op_log, used = 0;
    int recomputed = f->recompute_counter < f->store.n_handles + 1 ? f->recompute_counter : f->store.n_handles + 1;
    int last = failed;
    for (int k = 0; k < failed; k++) {
        const char *fwd = k < f->store.n_handles ? f->store.meta[k].op : NULL;
        const char *rec = k < recomputed ? f->recompute_ops[k] : NULL;
        if (!fwd || !rec || strcmp(fwd, rec) != 0) {
            last = k;
            what = "first op that differs";
            break;
        }
    }
    enum { SHOWN_ROWS = 16 };
    int first = last >= SHOWN_ROWS ? last - SHOWN_ROWS + 1 : 0;
    int n = snprintf(log, cap, "saved tensor | forward op | recompute op\n");
    if (n > 0 && first > 0)
        n += snprintf(log + n, cap - (size_t)n, "#0..#%d | (the same ops) | (the same ops)\n", first - 1);
    used = n > 0 ? (size_t)n : 0;
    for (int k = first; k <= last && used < cap; k++) {
        const char *fwd = k < f->store.n_handles ? f->store.meta[k].op : "(none: forward saved no more)";
        const char *rec = k < recomputed ? f->recompute_ops[k] : "(none: recompute saved no more)";
        n = snprintf(log + used, cap - used, "#%d | %s | %s%s%s\n", k, fwd, rec, k == last ? " <- " : "",
                     k == last ? what : "");
        if (n < 0)
            break;
        used += (size_t)n;
    }
}

/* Inner pack hook of the recompute: the k-th saved tensor fills handle k
 * (k - slot_offset, which only a count_unpack service moves). Once the
 * last handle is filled the recompute stops (PyTorch's early stop). */
static int recompute_pack(void *ctx, const struct node *n, const tensor *t, void **packed)
{
    struct nr_frame *f = ctx;
    *packed = NULL;
    int k = f->recompute_counter++;
    if (k <= f->store.n_handles)
        f->recompute_ops[k] = n->name;
    /* Only reachable with early_stop = false: otherwise the recompute stops
     * at the last handle. */
    if (k >= f->store.n_handles) {
        write_op_log(f, k, "saved by the recompute only");
        return error_set(ST_MISMATCH, "recompute saved more tensors (%d) than the forward did (%d; the extra one by "
                                      "op %s)",
                         k + 1, f->store.n_handles, n->name);
    }
    int slot = k - f->store.slot_offset;
    if (slot >= 0 && f->store.meta[slot].alive && !f->store.meta[slot].cached) {
        /* A slot a previous recompute filled but nobody unpacked. */
        tensor_free(f->store.recomputed[slot]);
        f->store.recomputed[slot] = NULL;
        int st = tensor_share(&f->store.recomputed[slot], t);
        if (st)
            return st;
        if (f->env.stats)
            f->env.stats->recomputed_tensors++;
    }
    return f->early_stop && f->recompute_counter == f->recompute_end ? ST_STOP : ST_OK;
}

/* The recompute keeps nothing through this hook itself: recompute_pack's
 * *packed is NULL, and the recompute graph is dropped right after. */
static int recompute_unpack(void *ctx, void *packed, tensor **out)
{
    (void)ctx;
    (void)packed;
    *out = NULL;
    return error_set(ST_INTERNAL, "a tensor saved during recompute was unpacked");
}

static int check_metadata(const struct nr_frame *f, int k, const tensor *t)
{
    const struct saved_meta *m = &f->store.meta[k];
    if (f->check == DETERMINISM_NONE)
        return ST_OK;
    int64_t shape[TENSOR_MAX_DIMS];
    int nd = tensor_shape(t, shape);
    if (tensor_dtype(t) != m->dtype)
        return error_set(ST_MISMATCH, "recomputed saved tensor #%d (op %s) has dtype %s; the forward saved %s", k,
                         m->op, dtype_name(tensor_dtype(t)), dtype_name(m->dtype));
    if (nd != m->ndim || memcmp(shape, m->shape, (size_t)nd * sizeof shape[0]) != 0)
        return error_set(ST_MISMATCH, "recomputed saved tensor #%d (op %s) has a different shape than in forward",
                         k, m->op);
    if (tensor_device(t) != m->device)
        return error_set(ST_MISMATCH, "recomputed saved tensor #%d (op %s) is on another device than in forward",
                         k, m->op);
    if (f->check == DETERMINISM_VALUES) {
        uint64_t fp;
        int st = fingerprint(t, &fp);
        if (st)
            return st;
        if (fp != m->fingerprint)
            return error_set(ST_MISMATCH,
                             "recomputed saved tensor #%d (op %s) differs from the forward's (value fingerprint)", k,
                             m->op);
    }
    return ST_OK;
}

/* The recompute's inputs, unpacked from the input saver (refused when
 * changed in place since forward; recomputed by the enclosing checkpoint
 * when nested), as leaves cut from the outer graph that require grad as
 * the forward's inputs did. */
static int recompute_inputs(struct nr_frame *f, struct var **detached)
{
    for (int i = 0; i < f->n_in; i++) {
        tensor *in;
        int st = node_saved(f->input_saver, i, &in);
        if (!st)
            st = var_leaf(&detached[i], in, f->input_requires_grad[i], "checkpoint.input");
        if (st)
            return st;
    }
    return ST_OK;
}

static int recompute(struct nr_frame *f)
{
    int st;
    if (!f->store.recomputed && !(f->store.recomputed = calloc((size_t)f->store.n_handles + 1, sizeof *f->store.recomputed)))
        return error_set(ST_RUN, "out of memory recomputing a checkpoint");
    if (!f->recompute_ops && !(f->recompute_ops = calloc((size_t)f->store.n_handles + 1, sizeof *f->recompute_ops)))
        return error_set(ST_RUN, "out of memory recomputing a checkpoint");
    f->recompute_counter = 0;
    struct var *detached[REGION_MAX_TENSORS] = {0}, *out[REGION_MAX_TENSORS] = {0};
    if ((st = recompute_inputs(f, detached)) || (st = saved_hooks_push(&f->recompute_hooks))) {
        region_release(detached, f->n_in);
        return st;
    }
    struct recompute_frame frame;
    st = checkpoint_env_enter(&f->env, &frame);
    if (!st)
        st = segment_call(&f->seg, detached, out);
    if (st == ST_STOP)
        st = ST_OK;
    int exit_st = checkpoint_env_exit(&f->env, &frame);
    saved_hooks_pop();
    region_release(out, f->n_out);
    region_release(detached, f->n_in);
    if (!st)
        st = exit_st;
    if (st)
        return st;
    f->store.recomputed_for = tape_engine_current_id();
    /* The first mismatch in saving order names the op that diverged first. */
    for (int k = 0; k < f->store.n_handles; k++) {
        if (!f->store.meta[k].alive || f->store.meta[k].cached)
            continue;
        if (!f->store.recomputed[k]) {
            write_op_log(f, k, "not recomputed");
            return error_set(ST_MISMATCH, "recompute saved %d tensors; the forward saved %d (saved tensor #%d, op %s, "
                                          "was not recomputed)",
                             f->recompute_counter, f->store.n_handles, k, f->store.meta[k].op);
        }
        if ((st = check_metadata(f, k, f->store.recomputed[k]))) {
            if (st == ST_MISMATCH)
                write_op_log(f, k, "recomputed tensor differs");
            return st;
        }
    }
    return f->env.services.recompute_done(&f->store);
}

/* A tensor cached in forward, handed out as it is, after PyTorch's check
 * that no in-place op changed it since (its version counter). No identity
 * or metadata check: the reference finds the entry by the handle's own
 * index and hands back the very tensor it measured, so neither could fail
 * (a cache_lookup service that finds another entry must take one of the
 * same metadata, or the gradients catch it). */
static int cached_unpack(struct nr_frame *f, int k, tensor **out)
{
    int j = f->env.services.cache_lookup(&f->store, k);
    const struct saved_meta *m = &f->store.meta[k], *e = &f->store.meta[j];
    if (!f->store.kept[j])
        return error_set(ST_INTERNAL, "cached saved tensor #%d (op %s) was already freed", k, m->op);
    char what[128];
    snprintf(what, sizeof what, "saved tensor #%d (op %s, call %d) kept by the selective policy", k, m->op,
             m->invocation);
    int st = f->env.services.cache_unchanged(f->store.kept[j], e->version, what);
    if (st)
        return st;
    return tensor_share(out, f->store.kept[j]);
}

static int forward_unpack(void *ctx, void *packed, tensor **out)
{
    (void)ctx;
    struct nr_handle *h = packed;
    struct nr_frame *f = h->frame;
    int k = h->index;
    int st;
    f->env.services.count_unpack(&f->store);
    if (f->store.meta[k].cached)
        return cached_unpack(f, k, out);
    if ((st = f->env.services.take_kept(&f->store, k, out)) || *out)
        return st;
    if (f->store.recomputed_for != tape_engine_current_id() && (st = recompute(f)))
        return st;
    if (!f->store.recomputed[k])
        return error_set(ST_MISMATCH, "saved tensor #%d (op %s) was unpacked twice in one backward without a recompute",
                         k, f->store.meta[k].op);
    /* Handed over: the frame drops its reference right away. */
    *out = f->store.recomputed[k];
    f->store.recomputed[k] = NULL;
    return ST_OK;
}

int impl_run_nonreentrant_keeping(const struct checkpoint_impl *impl, const struct impl_options *opts,
                                  const struct segment_fn *seg, struct var *const *in, struct var **out,
                                  unsigned keep)
{
    int n_in = segment_n_in(seg), n_out = segment_n_out(seg);
    if (n_in > REGION_MAX_TENSORS || n_out > REGION_MAX_TENSORS)
        return error_set(ST_INTERNAL, "a region takes at most %d tensors in and %d out", REGION_MAX_TENSORS,
                         REGION_MAX_TENSORS);
    struct nr_frame *f = calloc(1, sizeof *f);
    if (!f)
        return error_set(ST_RUN, "out of memory creating a checkpoint");
    f->refcount = 1;
    f->seg = *seg;
    f->n_out = n_out;
    f->check = opts->determinism_check;
    f->early_stop = !opts->disable_early_stop;
    f->store.recomputed_for = NO_RECOMPUTE;
    f->keep = keep;
    f->forward_hooks = (struct saved_hooks){forward_pack, forward_unpack, handle_free, f};
    f->recompute_hooks = (struct saved_hooks){recompute_pack, recompute_unpack, NULL, f};
    f->n_in = n_in;
    int st = node_create(&f->input_saver, "checkpoint_nonreentrant_inputs", NULL, NULL, 0, 0);
    for (int i = 0; i < n_in && !st; i++) {
        f->input_requires_grad[i] = in[i]->requires_grad;
        st = node_save(f->input_saver, in[i]->data);
    }
    if (!st && !(st = checkpoint_env_capture(&f->env, impl, opts, in, n_in))) {
        f->store.stats = opts->stats;
        f->env.replay_rng = f->env.replay_rng && f->env.services.rng_replay_needed(keep);
    }
    if (!st)
        st = saved_hooks_push(&f->forward_hooks);
    if (st) {
        frame_release(f);
        return st;
    }
    if (opts->context && opts->context->forward_enter)
        opts->context->forward_enter(opts->context->ctx);
    st = segment_call(seg, in, out);
    if (opts->context && opts->context->forward_exit)
        opts->context->forward_exit(opts->context->ctx);
    saved_hooks_pop();
    if (!st && (st = checkpoint_env_check_forward(&f->env)))
        region_release(out, n_out);
    if (!st && (st = f->env.services.forward_done(&f->store)))
        region_release(out, n_out);
    frame_release(f); /* the handles keep it alive as long as nodes hold them */
    return st;
}

int impl_run_nonreentrant(const struct checkpoint_impl *impl, const struct impl_options *opts,
                          const struct segment_fn *seg, struct var *const *in, struct var **out)
{
    return impl_run_nonreentrant_keeping(impl, opts, seg, in, out, 0);
}
