/* model: the harness's models as lists of layers over named parameters —
 * mlp, gpt_block, branchy, rrelu_mlp, bn_mlp, scaled_mlp, two_stream — exactly as DESIGN.md and
 * docs/models.md define them, so other frameworks can rebuild them from the
 * HDF5 file alone. A layer maps one activation to the next; checkpoint
 * segments are runs of consecutive layers (segment_plan). It also predicts,
 * from the layer shapes and what each op saves (ops.h), how many bytes a
 * forward leaves saved for backward under a given segmenting. */
#ifndef CKPT_MODEL_H
#define CKPT_MODEL_H

#include "case.h"
#include "module_state.h"
#include "tape.h"

#define MODEL_PARAM_NAME_MAX 48

struct model_param {
    char name[MODEL_PARAM_NAME_MAX]; /* "l0.weight", "h1.attn.qkv.weight" */
    int layer;
    int ndim;
    int64_t shape[2];
    double init_std; /* normal(0, init_std); 0 = ones (norm weights); -1 = zeros */
    struct var *var; /* set by the runner for a run */
};

struct model {
    enum model_kind kind;
    int layers, hidden, seq, batch, heads;
    double dropout;
    enum fusion_kind fusion;
    enum dtype dtype;
    enum autocast_kind autocast; /* the case's autocast around forward */
    int device;
    int draw_device; /* where mlp dropout draws (case key draw_device); = device when same */
    int n_params;
    struct model_param *params;
    /* Buffers (module_state.h): bn_mlp's running statistics, scaled_mlp's
     * amax history and scale; none for the other models. */
    int n_buffers;
    struct module_buffer *buffers;
    /* The live buffers of a run: allocated here (NULL without buffers),
     * filled by the runner for each run (module_state_init) and emptied after. */
    struct module_state *state;
};

/* Whether this build and machine have every device the case names (device,
 * draw_device): ST_INPUT in one line naming the case's file and line
 * otherwise (a CPU build refuses any cuda device). Run before anything. */
int model_check_devices(const struct ckpt_case *c);
/* Lays out the model's parameters and buffers for a case (no values yet). */
int model_create(struct model *m, const struct ckpt_case *c, int device);
void model_free(struct model *m);

/* Input and target shapes: [batch, seq, hidden]. */
void model_input_shape(const struct model *m, int64_t shape[3]);
/* Runs layer `layer` on x. */
int model_layer_forward(const struct model *m, int layer, struct var *x, struct var **out);
/* Runs layers [begin, end) on x. */
int model_layers_forward(const struct model *m, int begin, int end, struct var *x, struct var **out);
/* The loss on the last activation: mean((x - target)^2). */
int model_loss(const struct model *m, struct var *x, struct var *target, struct var **loss);

/* The tensors that flow from layer to layer (the streams): one, the
 * activation x, for every model but two_stream, which carries three — x,
 * the residual stream r, and c, made under no_grad in the layer before (a
 * constant). A checkpointed run of layers is then a region of that many
 * tensors in and out, whose non-tensor argument is model_region_scalar. */
#define MODEL_MAX_STREAMS 3
int model_streams(const struct model *m);
/* two_stream's residual scale s (r' = r + s·h), handed to a run of layers
 * as its non-tensor argument; unused by the other models. */
double model_region_scalar(const struct model *m);
/* The streams entering layer 0: x (a new reference) and, for two_stream,
 * r and c as zeros of x's shape and dtype — made here, in forward. */
int model_streams_begin(const struct model *m, struct var *x, struct var **streams);
/* Runs layers [begin, end) on the streams; scalar: the non-tensor argument.
 * out[0..model_streams) are new references. */
int model_layers_forward_streams(const struct model *m, int begin, int end, struct var *const *in, double scalar,
                                 struct var **out);
/* The activation the loss reads: streams[0], or x + r for two_stream. */
int model_streams_end(const struct model *m, struct var *const *streams, struct var **out);
/* One line per layer: "layer 0: linear(l0.weight, l0.bias) -> gelu_tanh -> dropout(p)". */
int model_describe(const struct model *m, char *buf, size_t len);

/* Which layers a checkpointed forward wraps, in the shape of torch's
 * checkpoint_sequential: `count` segments of `size` consecutive layers
 * from layer 0 ([k*size, (k+1)*size) for k < count), then layers
 * [plain_from, layers) run plainly. */
struct segment_plan {
    int size, count, plain_from;
};
/* segments as a case stores it: 0 = every layer its own segment; N =
 * checkpoint_sequential(N): size L/N, N-1 segments checkpointed, the rest
 * (the last L - size*(N-1) layers) plain, so N = 1 checkpoints nothing;
 * SEGMENTS_NONE = everything plain. */
void segment_plan_make(struct segment_plan *p, int layers, int segments);

/* Bytes that the forward of m (through the loss) leaves allocated for
 * backward when the layers are checkpointed as `plan` says, counted the way
 * the runner measures memory.end_forward_bytes: bytes newly allocated since
 * the step began, so parameters, the input x and the target (allocated
 * before) count only through copies made of them (autocast casts). Exact on
 * the counting CPU allocator for the reference impls (none, reentrant,
 * nonreentrant: a checkpointed segment keeps just its input tensor), except
 * a reentrant checkpoint whose input requires no grad: it records nothing
 * and holds less. On CUDA the caching allocator rounds each block up to 512
 * bytes. model.c lists every term; docs/memory.md explains them. */
int64_t model_predict_saved_bytes(const struct model *m, const struct segment_plan *plan);
/* The same for selective checkpointing: a checkpointed segment also keeps
 * what the ops in `keep` (a bit set over enum policy_op, policy.h) save
 * in its layers. keep = 0 is the prediction above. */
int64_t model_predict_saved_bytes_keeping(const struct model *m, const struct segment_plan *plan, unsigned keep);

#endif
