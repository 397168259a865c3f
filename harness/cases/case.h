/* case: one resolved case definition, and the loader that reads INI case
 * files (cases/NAME.ini) into a list of them, expanding sweeps.
 * Every error names the file and line and returns ST_INPUT.
 * Made of: case.c (queries on cases and lists), case_load.c (files and
 * directories into lists), case_ini.c (INI reading), case_sweep.c (sweep
 * expansion), case_keys.c (the key table: how each key is parsed and
 * printed), case_check.c (keys checked against each other), case_attrs.c
 * (a case from recorded attributes), case_text.c (text helpers). */
#ifndef CKPT_CASE_H
#define CKPT_CASE_H

#include <stdint.h>

#include "verdict.h"

#define CASE_NAME_MAX 96
#define CASE_MAX_IMPLS 16
#define CASE_MAX_LABELS 8
/* The deepest nesting of checkpoints a case may ask for (key `nest`): each
 * level is one more engine call and one more saved-tensor hook inside the
 * last (tape.c allows 16 of each), and PyTorch's tests nest no deeper. */
#define CASE_MAX_NEST 8
#define CASE_WORD_MAX 32
#define CASE_POLICY_MAX 160

enum model_kind { MODEL_MLP = 0, MODEL_GPT_BLOCK, MODEL_BRANCHY, MODEL_RRELU_MLP, MODEL_BN_MLP, MODEL_SCALED_MLP,
                  MODEL_TWO_STREAM };
enum fusion_kind { FUSION_NONE = 0, FUSION_BIAS_GELU, FUSION_BIAS_GELU_ATOMIC };
enum autocast_kind { AUTOCAST_OFF = 0, AUTOCAST_BF16, AUTOCAST_F16 };
/* Which devices' RNG a checkpoint stashes (DESIGN.md "RNG stashing"): the
 * devices of the segment's tensor arguments and the current device
 * (`rng_devices = args+current`), or the arguments' alone (`args`,
 * PyTorch's policy). CPU is always stashed. */
enum rng_devices { RNG_ARGS_AND_CURRENT = 0, RNG_ARGS_ONLY };
/* What a non-reentrant checkpoint compares between a recomputed saved tensor
 * and its forward original (PyTorch's determinism_check, plus values):
 * metadata (shape, dtype, device; the default, 0), values too (a fingerprint
 * of the bytes), or nothing. */
enum determinism_check { DETERMINISM_METADATA = 0, DETERMINISM_VALUES, DETERMINISM_NONE };
/* How every run of a case calls each step's backward (PyTorch's API):
 * loss.backward() (`loss`, the default, 0); torch.autograd.grad(loss,
 * leaves), the results set as each leaf's .grad (`grad`);
 * loss.backward(inputs=leaves) (`inputs`); loss.backward(retain_graph=True)
 * and loss.backward() again, the gradients summing (`twice`). Reentrant
 * checkpoints refuse `grad` and `inputs`, as PyTorch's do. */
enum backward_api { BACKWARD_LOSS = 0, BACKWARD_GRAD, BACKWARD_INPUTS, BACKWARD_TWICE };
/* Backward calls per step under api: 2 for twice, else 1. */
int backward_calls_per_step(enum backward_api api);

/* "mlp", "gpt_block", ... as the case key `model` spells it. */
const char *case_model_name(enum model_kind kind);
/* The enum value of a model, fusion or autocast as case files and reports
 * spell it (canonical names only), or -1. */
int case_model_from_name(const char *name);
int case_fusion_from_name(const char *name);
int case_autocast_from_name(const char *name);

struct impl_expectation {
    char impl[CASE_WORD_MAX];
    unsigned verdict_mask; /* bit (1u << verdict) per allowed verdict */
};

/* A segment count meaning no checkpoint at all: the baseline (segment
 * plans and predictions take it beside the case's own counts). */
#define SEGMENTS_NONE (-1)

struct ckpt_case {
    char name[CASE_NAME_MAX];
    char file[256]; /* where it was defined: file and line of its section */
    int line;

    enum model_kind model;
    int layers, hidden, seq, batch, heads;
    double dropout;
    int dtype; /* enum dtype */
    enum autocast_kind autocast;
    enum fusion_kind fusion;
    char device[CASE_WORD_MAX]; /* "cpu", "cuda:0" */
    /* Where each mlp layer's dropout draws: its input moves there and the
     * result back, so a segment that receives tensors on `device` draws on
     * another one. "" = on `device` itself (written `same`). */
    char draw_device[CASE_WORD_MAX];
    int steps;
    uint64_t seed;
    int segments;          /* number of segments; 0 = every layer its own */
    double lr;
    double tolerance;       /* max ULP allowed for PASS; 0 = bitwise */
    double min_memory_saving; /* the peak cut required: fraction 0..1; <0 = no requirement */
    double min_held_cut;      /* the cut in bytes held at the end of forward required: 0..1; <0 = none */
    int preserve_rng_state; /* bool, default 1 */
    int input_requires_grad; /* bool, default 1 */
    enum rng_devices rng_devices;
    int noise_runs;         /* extra baseline runs before a FAIL is reported */
    enum determinism_check determinism_check; /* `verify_values = true` is `values` */
    int early_stop;         /* bool, default 1: a recompute stops after the last saved tensor */
    enum backward_api backward; /* each step's backward call */
    int threads;            /* intra-op threads; 0 = leave libtorch's default */
    int nest;               /* checkpoints around each checkpointed segment, one inside the other (1..CASE_MAX_NEST) */
    /* selective checkpointing's policy as written (policy.h); "" = none */
    char policy[CASE_POLICY_MAX];

    int n_impls;
    char impls[CASE_MAX_IMPLS][CASE_WORD_MAX];
    int n_expect;
    struct impl_expectation expect[CASE_MAX_IMPLS];
    int n_labels;
    char labels[CASE_MAX_LABELS][CASE_WORD_MAX];
};

struct case_list {
    int count, capacity;
    struct ckpt_case *items;
};

/* The defaults every case starts from (documented in cases/README.md). */
void case_defaults(struct ckpt_case *c);
/* Appends the cases of one INI file (sweeps expanded). */
int case_list_load_file(struct case_list *list, const char *path);
/* Loads every *.ini under dir, in name order. */
int case_list_load_dir(struct case_list *list, const char *dir);
/* Loads a file or a directory. */
int case_list_load(struct case_list *list, const char *path);
void case_list_free(struct case_list *list);
const struct ckpt_case *case_list_find(const struct case_list *list, const char *name);
/* Up to n names closest to `name` (edit distance), for "did you mean". */
int case_list_suggest(const struct case_list *list, const char *name, const char **out, int n);
/* The same for a label (--suite) among the labels the cases carry. */
int case_list_suggest_label(const struct case_list *list, const char *label, const char **out, int n);
/* Allowed verdict mask for an impl: the case's expect entry, or the default
 * (PASS|NOISE for references; FAIL|MEMFAIL for impls under faulty/). */
unsigned case_expected_mask(const struct ckpt_case *c, const char *impl);
int case_has_label(const struct ckpt_case *c, const char *label);
/* A case rebuilt from its recorded attributes (a report's /case group, as
 * case_foreach_attr wrote them): begin from the defaults, apply each
 * attribute through the case-file parsers (unknown keys are another
 * producer's and are ignored; a bad value of a known key is ST_INPUT naming
 * `source` and the key), then finish, which checks the keys together and
 * frees the builder either way. case_attrs_apply fits h5store_foreach_attr. */
struct case_from_attrs;
int case_attrs_begin(struct case_from_attrs **out, const char *source);
int case_attrs_apply(void *builder, const char *key, const char *value);
int case_attrs_finish(struct case_from_attrs *builder, struct ckpt_case *out);

/* How an attribute value of case_foreach_attr is stored as data: a whole
 * number that fits int64 (*i), another finite number written with a '.'
 * or an exponent (*d), or text (names, lists, "every", a seed beyond
 * int64). The report and summary.json store it so. */
enum case_value_kind { CASE_VALUE_TEXT, CASE_VALUE_INT, CASE_VALUE_REAL };
enum case_value_kind case_value_kind(const char *value, long long *i, double *d);

/* Writes "key=value" pairs of the resolved case via the callback (recorder
 * stores them as attributes, the report prints them). */
void case_foreach_attr(const struct ckpt_case *c,
                       void (*fn)(void *ctx, const char *key, const char *value), void *ctx);

#endif
