/* tape: the harness's reverse-mode autograd, in the image of PyTorch's.
 * Ops record nodes (backward function, edges to the nodes that produced
 * their inputs, saved tensors) while grad mode is on; saved tensors go
 * through the saved-tensor hook stack; the engine runs a backward pass in a
 * fixed, documented order and may be re-entered from a node's backward.
 *
 * Global state (the only mutable globals of the harness besides autocast,
 * see autocast.h): grad mode, the saved-tensor hook stack, the node sequence
 * counter and the engine's call stack. Single-threaded by design. */
#ifndef CKPT_TAPE_H
#define CKPT_TAPE_H

#include <stdint.h>

#include "aten/aten.h"

#define NODE_MAX_INPUTS 8
#define NODE_MAX_OUTPUTS 4
#define NODE_MAX_SAVED 8
#define NODE_MAX_SCALARS 8
#define VAR_NAME_MAX 64

struct node;
struct var;
struct grad_hook;

/* grad_outputs[i]: gradient w.r.t. output i (never NULL: the engine fills
 * zeros for outputs that received none). grad_inputs[i]: to be set (a new
 * handle) for every input edge that needs a gradient; may stay NULL. */
typedef int (*backward_fn)(struct node *n, tensor *const *grad_outputs, tensor **grad_inputs);

struct edge {
    struct node *node; /* NULL: the input needs no gradient */
    int input_nr;      /* which output of `node` this input was */
};

/* A saved tensor: either kept as is (no hook was active) or packed by the
 * hook that was on top of the stack when it was saved. */
struct saved_tensor {
    tensor *kept;
    void *packed;
    const struct saved_hooks *hooks;
    int used; /* slot filled */
    /* kept: the storage's version counter when saved; unpacking checks it
     * (packed tensors are the hook's business, as in PyTorch). */
    int64_t version;
};

struct output_meta {
    int ndim;
    int64_t shape[TENSOR_MAX_DIMS];
    enum dtype dtype;
    int device;
};

struct node {
    const char *name;          /* op name: "linear", "gelu", "checkpoint" ... */
    uint64_t sequence_nr;      /* creation order; larger runs first */
    int refcount;
    backward_fn backward;
    int n_inputs;
    struct edge next[NODE_MAX_INPUTS];
    /* dtype and shape of each input at record time: the engine casts and
     * checks the gradients a backward returns against them, as PyTorch's
     * engine validates outputs (mixed-dtype ops under autocast rely on it). */
    struct output_meta in_meta[NODE_MAX_INPUTS];
    int n_outputs;
    struct output_meta out_meta[NODE_MAX_OUTPUTS];
    int n_saved;
    struct saved_tensor saved[NODE_MAX_SAVED];
    double scalars[NODE_MAX_SCALARS]; /* op parameters (p, eps, ...) */
    int ints[NODE_MAX_SCALARS];
    /* Op-specific state (checkpoint frames); freed with ctx_free. */
    void *ctx;
    void (*ctx_free)(void *ctx);
    struct var *leaf; /* accumulate-grad nodes: the leaf they feed (owned ref) */
    struct node *release_next; /* node_release's worklist; no meaning otherwise */
};

struct var {
    tensor *data;
    struct node *grad_fn;       /* owned ref; NULL for leaves and constants */
    int output_nr;
    int requires_grad;
    tensor *grad;               /* leaves: accumulated gradient */
    struct node *grad_accumulator; /* leaves: weak; cleared when that node dies */
    char name[VAR_NAME_MAX];
    int refcount;
    struct grad_hook *hooks;    /* leaves: var_register_hook's, in registration order */
};

/* ---- grad mode ---------------------------------------------------------- */
int grad_mode_enabled(void);
/* Sets grad mode and returns the previous value (restore it after). */
int grad_mode_set(int enabled);

/* ---- saved-tensor hooks (PyTorch's saved_tensors_hooks) ------------------ */
struct saved_hooks {
    /* Returns a status; *packed is what the node keeps instead of t.
     * n is the node saving it (its name says which op). */
    int (*pack)(void *ctx, const struct node *n, const tensor *t, void **packed);
    /* *out: a new handle to the tensor to use in backward. */
    int (*unpack)(void *ctx, void *packed, tensor **out);
    /* Releases a packed handle when its node is freed (may be NULL). */
    void (*free_packed)(void *ctx, void *packed);
    void *ctx;
};
/* Only the innermost pair applies, as in PyTorch. The struct must outlive
 * every node that saved through it. */
int saved_hooks_push(const struct saved_hooks *hooks);
void saved_hooks_pop(void);
const struct saved_hooks *saved_hooks_top(void);
int saved_hooks_depth(void);

/* ---- vars ----------------------------------------------------------------- */
/* A leaf (parameter or input); takes ownership of data (freed on error too).
 * name: NULL, or at most VAR_NAME_MAX - 1 characters (longer is an error). */
int var_leaf(struct var **out, tensor *data, int requires_grad, const char *name);
/* A value that never needs a gradient; takes ownership of data. */
int var_constant(struct var **out, tensor *data);
struct var *var_retain(struct var *v);
void var_release(struct var *v); /* NULL is fine */
/* A leaf sharing v's data, cut from v's graph (PyTorch's detach()). */
int var_detach(struct var **out, const struct var *v, int requires_grad);
/* Drops a leaf's accumulated gradient. */
void var_zero_grad(struct var *v);
int var_is_leaf(const struct var *v);
/* PyTorch's Tensor.register_hook on a leaf: fn runs each time an engine
 * call has the leaf's whole gradient for that pass — before it accumulates
 * into ->grad in a backward, when it is captured in a grad() — and is not
 * run where a pass leaves the leaf alone (backward(inputs=) without it).
 * It observes the gradient (no replacement). Hooks die with the leaf. */
typedef void (*grad_hook_fn)(void *ctx, struct var *leaf, const tensor *grad);
int var_register_hook(struct var *leaf, grad_hook_fn fn, void *ctx);

/* ---- recording an op ---------------------------------------------------- */
/* Whether an op on these inputs records a node: grad mode on and at least
 * one input requires grad. */
int tape_should_record(struct var *const *inputs, int n_inputs);
/* A node with edges to each input that requires grad (NULL inputs allowed). */
int node_create(struct node **out, const char *name, backward_fn backward,
                struct var *const *inputs, int n_inputs, int n_outputs);
struct node *node_retain(struct node *n);
void node_release(struct node *n);
/* Saves t in the next slot through the current hook (or keeps it). */
int node_save(struct node *n, const tensor *t);
/* A new handle to saved tensor i (unpacking through its hook). A kept
 * tensor changed in place since node_save is ST_MISMATCH (see
 * tape_check_version). */
int node_saved(struct node *n, int i, tensor **out);
/* PyTorch's saved-tensor version check, the one mechanism every saved
 * tensor goes through (the tape's kept tensors, a non-reentrant
 * checkpoint's inputs, selective checkpointing's cached ones): when t's
 * version counter is no longer saved_version, ST_MISMATCH with one line
 * naming `what` (the tensor and the op that saved it), both versions, and
 * PyTorch's words ("modified by an inplace operation"). */
int tape_check_version(const tensor *t, int64_t saved_version, const char *what);
/* Frees every saved tensor (the engine does this after running the node). */
void node_release_saved(struct node *n);
/* Wraps an op output: takes ownership of data; with n == NULL the var is a
 * constant that requires no grad. Records the output's metadata in n. */
int var_from_op(struct var **out, tensor *data, struct node *n, int output_nr);

/* ---- op observer ---------------------------------------------------------- */
/* Called by every op (recording or not) with its inputs and its output, while
 * set; checkpoint context hooks use it to see which tensors enter a region.
 * An op whose saving stopped a recompute early (a saved-tensor hook's
 * ST_STOP) ran: it is observed, its output a constant dropped right after.
 * Part of the tape's global state; NULL to unset. Returns the previous. */
typedef void (*op_observer_fn)(void *ctx, const char *op, struct var *const *inputs, int n_inputs,
                               const struct var *output);
struct op_observer {
    op_observer_fn fn;
    void *ctx;
};
struct op_observer tape_set_op_observer(struct op_observer observer);
void tape_observe_op(const char *op, struct var *const *inputs, int n_inputs, const struct var *output);

/* ---- the engine ----------------------------------------------------------- */
/* Backward from roots with the given upstream gradients (NULL entry = ones,
 * only for one-element roots). Gradients of leaves accumulate into
 * var->grad. Order (documented and fixed):
 *  - a node runs when every node reachable from the roots that feeds it has
 *    run; among ready nodes the one with the highest sequence_nr runs first
 *    (accumulate-grad nodes count as highest), as PyTorch's CPU engine does;
 *  - gradients arriving at the same input are summed in arrival order:
 *    buffer = buffer + incoming;
 *  - a leaf's grad: first gradient kept, later ones added: grad = grad + g.
 * Saved tensors of a node are freed right after it runs (see
 * tape_backward_with for retain_graph). Leaves' gradient hooks run just
 * before their gradient accumulates. */
int tape_backward(struct var *const *roots, tensor *const *grad_roots, int n_roots);
/* Like torch.autograd.grad: gradients of roots w.r.t. inputs into grads
 * (new handles, NULL if unreachable), nothing accumulated into leaves.
 * Checkpoint nodes can tell they run inside such a partial pass. */
int tape_grad(struct var *const *roots, tensor *const *grad_roots, int n_roots,
              struct var *const *inputs, int n_inputs, tensor **grads);
/* PyTorch's backward(..., retain_graph=, inputs=) and
 * autograd.grad(..., retain_graph=). retain_graph: saved tensors stay after
 * their node runs, so the graph can be backwarded again (each pass unpacks
 * them again). inputs (n_inputs > 0): only these leaves accumulate (and
 * run their hooks); like grad(), such a pass counts as partial. */
struct backward_options {
    int retain_graph;
    struct var *const *inputs;
    int n_inputs;
};
int tape_backward_with(struct var *const *roots, tensor *const *grad_roots, int n_roots,
                       const struct backward_options *opts);
/* tape_grad with retain_graph (opts->inputs is ignored: inputs are given). */
int tape_grad_with(struct var *const *roots, tensor *const *grad_roots, int n_roots, struct var *const *inputs,
                   int n_inputs, tensor **grads, const struct backward_options *opts);
/* 1 while the innermost running engine call is a tape_grad or a backward
 * with inputs (PyTorch's "checkpoint not valid" passes). */
int tape_engine_is_partial(void);
/* Identifies the innermost running backward (0 outside any); distinct for
 * every engine call, like PyTorch's graph task id. */
uint64_t tape_engine_current_id(void);
/* Nodes run by all engine calls so far (tests use it). */
uint64_t tape_nodes_executed(void);

#endif
