#include "tape.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

#define HOOK_STACK_MAX 16
#define ENGINE_STACK_MAX 16

/* The tape's global state; see tape.h for why it is global. */
static struct {
    int grad_enabled;
    const struct saved_hooks *hooks[HOOK_STACK_MAX];
    int hook_depth;
    uint64_t next_sequence_nr;
    struct { int partial; uint64_t id; } engine[ENGINE_STACK_MAX];
    int engine_depth;
    uint64_t next_engine_id;
    uint64_t nodes_executed;
    struct op_observer observer;
} tape = {.grad_enabled = 1};

struct op_observer tape_set_op_observer(struct op_observer observer)
{
    struct op_observer previous = tape.observer;
    tape.observer = observer;
    return previous;
}

void tape_observe_op(const char *op, struct var *const *inputs, int n_inputs, const struct var *output)
{
    if (tape.observer.fn)
        tape.observer.fn(tape.observer.ctx, op, inputs, n_inputs, output);
}

int grad_mode_enabled(void) { return tape.grad_enabled; }

int grad_mode_set(int enabled)
{
    int previous = tape.grad_enabled;
    tape.grad_enabled = enabled ? 1 : 0;
    return previous;
}

int saved_hooks_push(const struct saved_hooks *hooks)
{
    if (tape.hook_depth == HOOK_STACK_MAX)
        return error_set(ST_INTERNAL, "saved-tensor hook stack overflow (%d deep)", HOOK_STACK_MAX);
    tape.hooks[tape.hook_depth++] = hooks;
    return ST_OK;
}

void saved_hooks_pop(void)
{
    if (tape.hook_depth > 0)
        tape.hook_depth--;
}

const struct saved_hooks *saved_hooks_top(void)
{
    return tape.hook_depth ? tape.hooks[tape.hook_depth - 1] : NULL;
}

int saved_hooks_depth(void) { return tape.hook_depth; }

/* ---- vars ---------------------------------------------------------------- */

static int var_alloc(struct var **out, tensor *data)
{
    struct var *v = calloc(1, sizeof *v);
    if (!v) {
        tensor_free(data);
        return error_set(ST_RUN, "out of memory allocating a tape variable");
    }
    v->data = data;
    v->refcount = 1;
    *out = v;
    return ST_OK;
}

int var_leaf(struct var **out, tensor *data, int requires_grad, const char *name)
{
    int st = var_alloc(out, data);
    if (st)
        return st;
    (*out)->requires_grad = requires_grad;
    if (!name)
        return ST_OK;
    /* A cut name could make two parameters one in the report: refuse it. */
    size_t len = strlen(name);
    if (len >= sizeof (*out)->name) {
        var_release(*out);
        *out = NULL;
        return error_set(ST_INTERNAL, "tape variable name '%.40s...' is %zu characters long; at most %d", name, len,
                         VAR_NAME_MAX - 1);
    }
    memcpy((*out)->name, name, len + 1);
    return ST_OK;
}

int var_constant(struct var **out, tensor *data) { return var_leaf(out, data, 0, NULL); }

struct var *var_retain(struct var *v)
{
    if (v)
        v->refcount++;
    return v;
}

struct grad_hook {
    grad_hook_fn fn;
    void *ctx;
    struct grad_hook *next;
};

int var_register_hook(struct var *leaf, grad_hook_fn fn, void *ctx)
{
    if (leaf->grad_fn)
        return error_set(ST_INTERNAL, "gradient hooks go on leaves; %s is an op's output",
                         leaf->name[0] ? leaf->name : "the variable");
    struct grad_hook *h = calloc(1, sizeof *h), **tail = &leaf->hooks;
    if (!h)
        return error_set(ST_RUN, "out of memory registering a gradient hook");
    h->fn = fn;
    h->ctx = ctx;
    while (*tail)
        tail = &(*tail)->next;
    *tail = h;
    return ST_OK;
}

static void run_grad_hooks(struct var *leaf, const tensor *grad)
{
    for (struct grad_hook *h = leaf->hooks; h; h = h->next)
        h->fn(h->ctx, leaf, grad);
}

void var_release(struct var *v)
{
    if (!v || --v->refcount > 0)
        return;
    while (v->hooks) {
        struct grad_hook *next = v->hooks->next;
        free(v->hooks);
        v->hooks = next;
    }
    tensor_free(v->data);
    tensor_free(v->grad);
    if (v->grad_accumulator)
        v->grad_accumulator->leaf = NULL;
    node_release(v->grad_fn);
    free(v);
}

int var_detach(struct var **out, const struct var *v, int requires_grad)
{
    tensor *shared;
    int st = tensor_share(&shared, v->data);
    if (st)
        return st;
    return var_leaf(out, shared, requires_grad, v->name);
}

void var_zero_grad(struct var *v)
{
    tensor_free(v->grad);
    v->grad = NULL;
}

int var_is_leaf(const struct var *v) { return v->grad_fn == NULL; }

/* ---- nodes --------------------------------------------------------------- */

static int accumulate_grad_backward(struct node *n, tensor *const *grad_outputs, tensor **grad_inputs);

/* The accumulate-grad node of a leaf, made on first use. The node owns a
 * reference to the leaf; the leaf points back weakly. */
static int leaf_accumulator(struct var *leaf, struct node **out)
{
    if (leaf->grad_accumulator) {
        *out = node_retain(leaf->grad_accumulator);
        return ST_OK;
    }
    struct node *n = calloc(1, sizeof *n);
    if (!n)
        return error_set(ST_RUN, "out of memory allocating an accumulate-grad node");
    n->name = "accumulate_grad";
    n->sequence_nr = UINT64_MAX;
    n->refcount = 1;
    n->backward = accumulate_grad_backward;
    n->n_outputs = 1;
    /* The leaf's own shape, dtype and device, as var_from_op records an
     * op's output: whatever the engine makes for this node is made there. */
    struct output_meta *m = &n->out_meta[0];
    m->ndim = tensor_shape(leaf->data, m->shape);
    m->dtype = tensor_dtype(leaf->data);
    m->device = tensor_device(leaf->data);
    n->leaf = var_retain(leaf);
    leaf->grad_accumulator = n;
    *out = n;
    return ST_OK;
}

int tape_should_record(struct var *const *inputs, int n_inputs)
{
    if (!tape.grad_enabled)
        return 0;
    for (int i = 0; i < n_inputs; i++)
        if (inputs[i] && inputs[i]->requires_grad)
            return 1;
    return 0;
}

int node_create(struct node **out, const char *name, backward_fn backward,
                struct var *const *inputs, int n_inputs, int n_outputs)
{
    if (n_inputs > NODE_MAX_INPUTS || n_outputs > NODE_MAX_OUTPUTS)
        return error_set(ST_INTERNAL, "op %s has too many inputs or outputs", name);
    struct node *n = calloc(1, sizeof *n);
    if (!n)
        return error_set(ST_RUN, "out of memory allocating node %s", name);
    n->name = name;
    n->sequence_nr = tape.next_sequence_nr++;
    n->refcount = 1;
    n->backward = backward;
    n->n_inputs = n_inputs;
    n->n_outputs = n_outputs;
    for (int i = 0; i < n_inputs; i++) {
        struct var *v = inputs[i];
        if (!v || !v->requires_grad)
            continue;
        struct output_meta *m = &n->in_meta[i];
        m->ndim = tensor_shape(v->data, m->shape);
        m->dtype = tensor_dtype(v->data);
        m->device = tensor_device(v->data);
        if (v->grad_fn) {
            n->next[i].node = node_retain(v->grad_fn);
            n->next[i].input_nr = v->output_nr;
        } else {
            int st = leaf_accumulator(v, &n->next[i].node);
            if (st) {
                node_release(n);
                return st;
            }
        }
    }
    *out = n;
    return ST_OK;
}

struct node *node_retain(struct node *n)
{
    if (n)
        n->refcount++;
    return n;
}

static void saved_tensor_clear(struct saved_tensor *s)
{
    if (s->kept)
        tensor_free(s->kept);
    else if (s->packed && s->hooks && s->hooks->free_packed)
        s->hooks->free_packed(s->hooks->ctx, s->packed);
    memset(s, 0, sizeof *s);
}

void node_release_saved(struct node *n)
{
    for (int i = 0; i < n->n_saved; i++)
        saved_tensor_clear(&n->saved[i]);
}

void node_release(struct node *n)
{
    /* A node freed here may drop the last reference to the nodes it points
     * to. They are chained through release_next (the node is ours alone once
     * its count is 0) instead of recursing, so a deep graph cannot overflow
     * the C stack and freeing never needs memory. */
    struct node *work = NULL;
    if (n && --n->refcount == 0) {
        n->release_next = NULL;
        work = n;
    }
    while (work) {
        struct node *cur = work;
        work = cur->release_next;
        node_release_saved(cur);
        if (cur->ctx_free)
            cur->ctx_free(cur->ctx);
        if (cur->leaf) {
            cur->leaf->grad_accumulator = NULL;
            var_release(cur->leaf);
        }
        for (int i = 0; i < cur->n_inputs; i++) {
            struct node *next = cur->next[i].node;
            if (next && --next->refcount == 0) {
                next->release_next = work;
                work = next;
            }
        }
        free(cur);
    }
}

int node_save(struct node *n, const tensor *t)
{
    if (n->n_saved == NODE_MAX_SAVED)
        return error_set(ST_INTERNAL, "op %s saves more than %d tensors", n->name, NODE_MAX_SAVED);
    struct saved_tensor *slot = &n->saved[n->n_saved];
    const struct saved_hooks *hooks = saved_hooks_top();
    int st;
    if (hooks) {
        st = hooks->pack(hooks->ctx, n, t, &slot->packed);
        slot->hooks = hooks;
    } else {
        st = tensor_share(&slot->kept, t);
        slot->version = tensor_version(t);
    }
    if (st)
        return st;
    slot->used = 1;
    n->n_saved++;
    return ST_OK;
}

int node_saved(struct node *n, int i, tensor **out)
{
    if (i < 0 || i >= n->n_saved || !n->saved[i].used)
        return error_set(ST_INTERNAL,
                         "op %s: saved tensor %d was already freed (backward through the graph a second time?)",
                         n->name, i);
    struct saved_tensor *s = &n->saved[i];
    if (!s->kept)
        return s->hooks->unpack(s->hooks->ctx, s->packed, out);
    char what[96];
    snprintf(what, sizeof what, "saved tensor #%d of %s", i, n->name);
    int st = tape_check_version(s->kept, s->version, what);
    return st ? st : tensor_share(out, s->kept);
}

int tape_check_version(const tensor *t, int64_t saved_version, const char *what)
{
    int64_t now = tensor_version(t);
    if (now == saved_version)
        return ST_OK;
    return error_set(ST_MISMATCH,
                     "%s was modified by an inplace operation after it was saved: it is at version %lld, saved at "
                     "version %lld (PyTorch: one of the variables needed for gradient computation has been modified "
                     "by an inplace operation)",
                     what, (long long)now, (long long)saved_version);
}

int var_from_op(struct var **out, tensor *data, struct node *n, int output_nr)
{
    int st = var_alloc(out, data);
    if (st)
        return st;
    if (!n)
        return ST_OK;
    struct output_meta *m = &n->out_meta[output_nr];
    m->ndim = tensor_shape(data, m->shape);
    m->dtype = tensor_dtype(data);
    m->device = tensor_device(data);
    (*out)->grad_fn = node_retain(n);
    (*out)->output_nr = output_nr;
    (*out)->requires_grad = 1;
    return ST_OK;
}

/* ---- the engine ----------------------------------------------------------- */

/* Per-node bookkeeping for one engine call. */
struct task_entry {
    struct node *node;
    int dependencies;               /* edges from graph nodes not yet run */
    tensor *buffer[NODE_MAX_OUTPUTS]; /* summed incoming gradients */
};

struct graph_task {
    struct task_entry *entries;
    int n, cap;
    int partial;         /* grad() or backward(inputs=): not a full backward */
    int retain_graph;    /* saved tensors stay after their node runs */
    /* grad(): where to capture gradients; no leaf accumulates. */
    int capturing;
    struct var *const *capture_inputs;
    int n_capture;
    tensor **captured;
    /* backward(inputs=): the only leaves that accumulate (none listed: all). */
    struct var *const *only_leaves;
    int n_only;
};

static int accumulates_into(const struct graph_task *g, const struct var *leaf)
{
    if (g->capturing)
        return 0;
    if (!g->n_only)
        return 1;
    for (int i = 0; i < g->n_only; i++)
        if (g->only_leaves[i] == leaf)
            return 1;
    return 0;
}

static struct task_entry *task_find(struct graph_task *g, const struct node *n)
{
    for (int i = 0; i < g->n; i++)
        if (g->entries[i].node == n)
            return &g->entries[i];
    return NULL;
}

static int task_add(struct graph_task *g, struct node *n, struct task_entry **out)
{
    if (g->n == g->cap) {
        int cap = g->cap ? g->cap * 2 : 64;
        struct task_entry *e = realloc(g->entries, (size_t)cap * sizeof *e);
        if (!e)
            return error_set(ST_RUN, "out of memory building the backward graph");
        g->entries = e;
        g->cap = cap;
    }
    struct task_entry *e = &g->entries[g->n++];
    memset(e, 0, sizeof *e);
    e->node = n;
    *out = e;
    return ST_OK;
}

struct node_stack {
    struct node **items;
    int len, cap;
};

static int node_stack_push(struct node_stack *s, struct node *n)
{
    if (s->len == s->cap) {
        int cap = s->cap ? s->cap * 2 : 64;
        struct node **items = realloc(s->items, (size_t)cap * sizeof *items);
        if (!items)
            return error_set(ST_RUN, "out of memory walking the backward graph");
        s->items = items;
        s->cap = cap;
    }
    s->items[s->len++] = n;
    return ST_OK;
}

/* Discovers every node reachable from the roots and counts, for each, the
 * edges that reach it from other reachable nodes. */
static int task_discover(struct graph_task *g, struct node **roots, int n_roots)
{
    struct node_stack stack = {0};
    struct task_entry *e;
    int st = ST_OK;
    for (int r = 0; r < n_roots && !st; r++) {
        if (!roots[r] || task_find(g, roots[r]))
            continue;
        if (!(st = task_add(g, roots[r], &e)))
            st = node_stack_push(&stack, roots[r]);
    }
    while (stack.len && !st) {
        struct node *n = stack.items[--stack.len];
        for (int i = 0; i < n->n_inputs && !st; i++) {
            struct node *next = n->next[i].node;
            if (!next)
                continue;
            if (!(e = task_find(g, next)) && !(st = task_add(g, next, &e)))
                st = node_stack_push(&stack, next);
            if (!st)
                e->dependencies++;
        }
    }
    free(stack.items);
    return st;
}

/* buffer = buffer + incoming, in arrival order; takes ownership of grad. */
/* Adds grad into *slot, taking ownership of grad. Like autograd's input
 * buffer, the sum goes into *slot's own memory when nothing else can see it,
 * so accumulating costs no extra activation-sized buffer at backward's peak;
 * a + b rounds the same either way. */
static int buffer_accumulate(tensor **slot, tensor *grad)
{
    if (!*slot) {
        *slot = grad;
        return ST_OK;
    }
    if (tensor_is_exclusive(*slot) && tensor_dtype(*slot) == tensor_dtype(grad)) {
        int st = tensor_add_(*slot, grad, 1.0);
        tensor_free(grad);
        return st;
    }
    tensor *sum;
    int st = tensor_add(&sum, *slot, grad);
    tensor_free(grad);
    if (st)
        return st;
    tensor_free(*slot);
    *slot = sum;
    return ST_OK;
}

static int accumulate_grad_backward(struct node *n, tensor *const *grad_outputs, tensor **grad_inputs)
{
    (void)grad_inputs;
    struct var *leaf = n->leaf;
    if (!leaf)
        return ST_OK;
    tensor *g;
    int st = tensor_share(&g, grad_outputs[0]);
    if (st)
        return st;
    return buffer_accumulate(&leaf->grad, g);
}

/* The ready node with the highest sequence number. */
static struct task_entry *task_next_ready(struct graph_task *g, int *done)
{
    struct task_entry *best = NULL;
    for (int i = 0; i < g->n; i++) {
        struct task_entry *e = &g->entries[i];
        if (done[i] || e->dependencies > 0)
            continue;
        if (!best || e->node->sequence_nr > best->node->sequence_nr)
            best = e;
    }
    return best;
}

static int materialize_grads(struct node *n, tensor **buffer)
{
    for (int k = 0; k < n->n_outputs; k++) {
        if (buffer[k])
            continue;
        const struct output_meta *m = &n->out_meta[k];
        int st = tensor_zeros(&buffer[k], m->dtype, m->ndim, m->shape, m->device);
        if (st)
            return st;
    }
    return ST_OK;
}

/* In partial mode, gradients for the requested inputs are taken from the
 * buffer of the node that stands for them, before that node runs. */
static int capture_gradients(struct graph_task *g, struct task_entry *e)
{
    for (int i = 0; i < g->n_capture; i++) {
        struct var *v = g->capture_inputs[i];
        struct node *target = v->grad_fn ? v->grad_fn : v->grad_accumulator;
        int slot = v->grad_fn ? v->output_nr : 0;
        if (target != e->node || !e->buffer[slot] || g->captured[i])
            continue;
        int st = tensor_share(&g->captured[i], e->buffer[slot]);
        if (st)
            return st;
        if (!v->grad_fn)
            run_grad_hooks(v, g->captured[i]);
    }
    return ST_OK;
}

/* Casts a returned gradient to its input's dtype and checks its shape. */
static int validate_grad(const struct node *n, int i, tensor **grad)
{
    const struct output_meta *m = &n->in_meta[i];
    int64_t shape[TENSOR_MAX_DIMS];
    int nd = tensor_shape(*grad, shape);
    if (nd != m->ndim || memcmp(shape, m->shape, (size_t)nd * sizeof shape[0]) != 0)
        return error_set(ST_INTERNAL, "backward of %s returned a gradient of the wrong shape for input %d",
                         n->name, i);
    if (tensor_dtype(*grad) == m->dtype)
        return ST_OK;
    tensor *cast;
    int st = tensor_to_dtype(&cast, *grad, m->dtype);
    if (st)
        return st;
    tensor_free(*grad);
    *grad = cast;
    return ST_OK;
}

static int run_node(struct graph_task *g, struct task_entry *e)
{
    struct node *n = e->node;
    tensor *grad_inputs[NODE_MAX_INPUTS] = {0};
    int st;
    if (g->capturing && (st = capture_gradients(g, e)))
        return st;
    /* grad() never accumulates into leaves; backward(inputs=) only into
     * the listed ones. */
    int accumulating = n->backward == accumulate_grad_backward;
    if (accumulating && (!n->leaf || !accumulates_into(g, n->leaf)))
        return ST_OK;
    /* No gradient reached the leaf (every edge into it brought none, as
     * from a checkpoint whose region cut its input off): like PyTorch's
     * AccumulateGrad, leave its grad as it is, and run no hook. */
    if (accumulating && !e->buffer[0])
        return ST_OK;
    if ((st = materialize_grads(n, e->buffer)))
        return st;
    if (accumulating)
        run_grad_hooks(n->leaf, e->buffer[0]);
    st = n->backward(n, e->buffer, grad_inputs);
    tape.nodes_executed++;
    if (st) {
        for (int i = 0; i < n->n_inputs; i++)
            tensor_free(grad_inputs[i]);
        return error_wrap(st, "backward of %s", n->name);
    }
    if (!g->retain_graph)
        node_release_saved(n);
    for (int i = 0; i < n->n_inputs; i++) {
        struct node *next = n->next[i].node;
        if (!next) {
            tensor_free(grad_inputs[i]);
            continue;
        }
        struct task_entry *target = task_find(g, next);
        target->dependencies--;
        if (grad_inputs[i] && (st = validate_grad(n, i, &grad_inputs[i]))) {
            for (int j = i; j < n->n_inputs; j++)
                tensor_free(grad_inputs[j]);
            return st;
        }
        if (grad_inputs[i] && (st = buffer_accumulate(&target->buffer[n->next[i].input_nr], grad_inputs[i]))) {
            for (int j = i + 1; j < n->n_inputs; j++)
                tensor_free(grad_inputs[j]);
            return st;
        }
    }
    return ST_OK;
}

static int engine_run(struct var *const *roots, tensor *const *grad_roots, int n_roots,
                      struct graph_task *g)
{
    struct node *root_nodes[NODE_MAX_INPUTS * 4];
    struct node *owned_accumulators[NODE_MAX_INPUTS * 4] = {0};
    int st = ST_OK, *done = NULL;
    if (n_roots > (int)(sizeof root_nodes / sizeof root_nodes[0]))
        return error_set(ST_INTERNAL, "too many backward roots (%d)", n_roots);
    if (tape.engine_depth == ENGINE_STACK_MAX)
        return error_set(ST_INTERNAL, "backward nested more than %d deep", ENGINE_STACK_MAX);
    for (int r = 0; r < n_roots; r++) {
        struct var *v = roots[r];
        root_nodes[r] = NULL;
        if (!v->requires_grad)
            continue;
        if (v->grad_fn) {
            root_nodes[r] = v->grad_fn;
        } else {
            /* A leaf root: its accumulator lives until this call ends. */
            if ((st = leaf_accumulator(v, &owned_accumulators[r])))
                goto out;
            root_nodes[r] = owned_accumulators[r];
        }
    }
    if ((st = task_discover(g, root_nodes, n_roots)))
        goto out;
    for (int r = 0; r < n_roots; r++) {
        if (!root_nodes[r])
            continue;
        struct task_entry *e = task_find(g, root_nodes[r]);
        tensor *seed;
        if (grad_roots && grad_roots[r]) {
            st = tensor_share(&seed, grad_roots[r]);
        } else {
            if (tensor_numel(roots[r]->data) != 1) {
                st = error_set(ST_INTERNAL, "backward from a non-scalar root needs its gradient");
                goto out;
            }
            int64_t shape[TENSOR_MAX_DIMS];
            int nd = tensor_shape(roots[r]->data, shape);
            st = tensor_full(&seed, tensor_dtype(roots[r]->data), nd, shape, tensor_device(roots[r]->data), 1.0);
        }
        if (st || (st = buffer_accumulate(&e->buffer[roots[r]->grad_fn ? roots[r]->output_nr : 0], seed)))
            goto out;
    }
    done = calloc((size_t)g->n + 1, sizeof *done);
    if (!done) {
        st = error_set(ST_RUN, "out of memory running backward");
        goto out;
    }
    tape.engine[tape.engine_depth].partial = g->partial;
    tape.engine[tape.engine_depth].id = ++tape.next_engine_id;
    tape.engine_depth++;
    struct task_entry *e;
    while ((e = task_next_ready(g, done))) {
        done[e - g->entries] = 1;
        st = run_node(g, e);
        for (int k = 0; k < NODE_MAX_OUTPUTS; k++) {
            tensor_free(e->buffer[k]);
            e->buffer[k] = NULL;
        }
        if (st)
            break;
    }
    tape.engine_depth--;
out:
    for (int i = 0; i < g->n; i++)
        for (int k = 0; k < NODE_MAX_OUTPUTS; k++)
            tensor_free(g->entries[i].buffer[k]);
    free(g->entries);
    free(done);
    for (int r = 0; r < n_roots; r++)
        node_release(owned_accumulators[r]);
    return st;
}

int tape_backward(struct var *const *roots, tensor *const *grad_roots, int n_roots)
{
    struct graph_task g = {0};
    return engine_run(roots, grad_roots, n_roots, &g);
}

int tape_backward_with(struct var *const *roots, tensor *const *grad_roots, int n_roots,
                       const struct backward_options *opts)
{
    struct graph_task g = {0};
    g.retain_graph = opts->retain_graph;
    if (opts->n_inputs > 0) {
        /* Only leaves accumulate a .grad here (a non-leaf input would need
         * PyTorch's retain_grad): refuse one rather than drop it silently. */
        for (int i = 0; i < opts->n_inputs; i++)
            if (opts->inputs[i]->grad_fn)
                return error_set(ST_INTERNAL, "backward(inputs=...): input %d (%s) is not a leaf", i,
                                 opts->inputs[i]->name[0] ? opts->inputs[i]->name : "unnamed");
        g.partial = 1;
        g.only_leaves = opts->inputs;
        g.n_only = opts->n_inputs;
    }
    return engine_run(roots, grad_roots, n_roots, &g);
}

int tape_grad(struct var *const *roots, tensor *const *grad_roots, int n_roots,
              struct var *const *inputs, int n_inputs, tensor **grads)
{
    struct backward_options plain = {0};
    return tape_grad_with(roots, grad_roots, n_roots, inputs, n_inputs, grads, &plain);
}

int tape_grad_with(struct var *const *roots, tensor *const *grad_roots, int n_roots, struct var *const *inputs,
                   int n_inputs, tensor **grads, const struct backward_options *opts)
{
    struct graph_task g = {0};
    g.retain_graph = opts->retain_graph;
    g.capturing = 1;
    /* A leaf input that no recorded node uses has no accumulator and so
     * gets no gradient (NULL), as torch.autograd.grad with allow_unused. */
    for (int i = 0; i < n_inputs; i++)
        grads[i] = NULL;
    g.partial = 1;
    g.capture_inputs = inputs;
    g.n_capture = n_inputs;
    g.captured = grads;
    int st = engine_run(roots, grad_roots, n_roots, &g);
    if (st)
        for (int i = 0; i < n_inputs; i++) {
            tensor_free(grads[i]);
            grads[i] = NULL;
        }
    return st;
}

int tape_engine_is_partial(void)
{
    return tape.engine_depth ? tape.engine[tape.engine_depth - 1].partial : 0;
}

uint64_t tape_engine_current_id(void)
{
    return tape.engine_depth ? tape.engine[tape.engine_depth - 1].id : 0;
}

uint64_t tape_nodes_executed(void) { return tape.nodes_executed; }
