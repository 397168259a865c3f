/* case_keys: the key table, the ONE place that says how each case key is
 * parsed (with its range and what a message says it allows) and how it
 * prints (case_foreach_attr, in the table's order); cases/README.md
 * documents the same keys for people. Internal to the case loader
 * (case_*.c): the builder a case is made in and the keys applied to it. */
#ifndef CKPT_CASE_KEYS_H
#define CKPT_CASE_KEYS_H

#include <stddef.h>

#include "case.h"

enum key_id {
    K_MODEL, K_LAYERS, K_HIDDEN, K_SEQ, K_BATCH, K_HEADS, K_DROPOUT, K_DTYPE,
    K_AUTOCAST, K_FUSION, K_DEVICE, K_DRAW_DEVICE, K_STEPS, K_SEED, K_SEGMENTS, K_LR,
    K_TOLERANCE, K_MIN_MEMORY_SAVING, K_MIN_HELD_CUT, K_PRESERVE_RNG_STATE,
    K_INPUT_REQUIRES_GRAD, K_VERIFY_VALUES, K_DETERMINISM_CHECK, K_EARLY_STOP, K_BACKWARD, K_RNG_DEVICES, K_NOISE_RUNS,
    K_THREADS, K_NEST, K_POLICY, K_IMPLS, K_EXPECT, K_LABELS, K_COUNT
};

/* A case while its keys are applied: the case plus what only matters until
 * it is finished. */
struct case_builder {
    struct ckpt_case c;
    int segments_sqrt;  /* "segments = sqrt": resolved from layers at the end,
                           because layers may be set later or by an axis */
    int set_at[K_COUNT]; /* line that set each key (0 = built-in default), so
                            that a cross-key error points at a real line */
};

struct key_spec;

/* Where a value comes from, for messages. */
struct where {
    const char *file;
    int line;
    const char *section; /* "[case:x]" */
    const char *key;     /* as written: "batch" or "axis.batch" */
    const struct key_spec *spec;
};

typedef int (*value_parser)(struct case_builder *b, const char *value, const struct where *at);
typedef void (*value_formatter)(const struct ckpt_case *c, const struct key_spec *spec, char *buf,
                                size_t n);

struct key_spec {
    const char *name;
    value_parser parse;
    value_formatter format;
    size_t offset;       /* the field, for the generic int / real / bool keys */
    double min, max;     /* the range, for the generic int / real keys */
    int is_list;         /* a comma list: cannot be a sweep axis */
    const char *allowed; /* what the value may be, for messages */
};

/* The key of that name (the old spelling rng_policy included), or NULL. */
const struct key_spec *case_key_find(const char *name);
enum key_id case_key_id(const struct key_spec *spec);
/* ST_INPUT naming file:line and the closest key, if one is near.
 * `prefix` is "axis." when the unknown name followed it. */
int case_key_unknown(const char *file, int line, const char *section, const char *prefix, const char *name);
/* Parses value into the builder by at->spec and records the line that set
 * the key; ST_INPUT naming at otherwise. */
int case_key_apply(struct case_builder *b, const struct where *at, const char *value);
/* The built-in defaults (case_defaults), no key set by any line yet. */
void case_builder_defaults(struct case_builder *b);
/* words[0..count) as "a,b,c", as the list keys print. */
void case_format_words(const char (*words)[CASE_WORD_MAX], int count, char *buf, size_t n);

#endif
