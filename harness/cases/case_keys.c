/* case_keys: the key table (key_specs) and everything it is made of: each
 * key's parser, its formatter, its range; the defaults every case starts
 * from; the names of models, fusions, autocast modes, ... as keys spell
 * them. */
#define _POSIX_C_SOURCE 200809L

#include "case_keys.h"

#include "case_text.h"
#include "dtype.h"
#include "error.h"
#include "policy.h"

#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    MAX_LAYERS = 1024,
    MAX_DIM = 65536,        /* hidden, seq, batch, heads */
    MAX_STEPS = 100000,
    MAX_NOISE_RUNS = 1000,
    MAX_THREADS = 1024,
    MAX_DEVICE_INDEX = 1023,
};

/* Indexed like enum model_kind, enum fusion_kind, ... */
static const char *const model_names[] = {"mlp", "gpt_block", "branchy", "rrelu_mlp", "bn_mlp", "scaled_mlp",
                                           "two_stream", NULL};
static const char *const fusion_names[] = {"none", "bias_gelu", "bias_gelu_atomic", NULL};
static const char *const autocast_names[] = {"off", "bf16", "f16", NULL};
static const char *const rng_devices_names[] = {"args+current", "args", NULL};
static const char *const determinism_check_names[] = {"metadata", "values", "none", NULL};
/* The spellings of the key's former name, rng_policy (still read). */
static const char *const rng_policy_names[] = {"args_and_current", "args_only", NULL};
static const char *const backward_api_names[] = {"loss", "grad", "inputs", "twice", NULL};

int backward_calls_per_step(enum backward_api api) { return api == BACKWARD_TWICE ? 2 : 1; }

static int bad_value(const struct where *at, const char *value)
{
    return error_set(ST_INPUT, "%s:%d: bad value '%s' for '%s' in %s: expected %s", at->file,
                     at->line, value, at->key, at->section, at->spec->allowed);
}

static int bad_item(const struct where *at, struct span item)
{
    return error_set(ST_INPUT, "%s:%d: bad item '%.*s' in '%s' in %s: expected %s", at->file,
                     at->line, (int)item.n, item.p, at->key, at->section, at->spec->allowed);
}

static int *int_field(struct ckpt_case *c, const struct key_spec *spec)
{
    return (int *)((char *)c + spec->offset);
}

static const int *const_int_field(const struct ckpt_case *c, const struct key_spec *spec)
{
    return (const int *)((const char *)c + spec->offset);
}

static double *real_field(struct ckpt_case *c, const struct key_spec *spec)
{
    return (double *)((char *)c + spec->offset);
}

static int set_int(struct case_builder *b, const char *v, const struct where *at)
{
    long x;
    if (text_parse_long(v, (long)at->spec->min, (long)at->spec->max, &x))
        return bad_value(at, v);
    *int_field(&b->c, at->spec) = (int)x;
    return ST_OK;
}

static int set_real(struct case_builder *b, const char *v, const struct where *at)
{
    double x;
    if (text_parse_real(v, at->spec->min, at->spec->max, &x))
        return bad_value(at, v);
    *real_field(&b->c, at->spec) = x;
    return ST_OK;
}

/* 1 or 0 into *out; -1 when v is no boolean. */
static int parse_bool(const char *v, int *out)
{
    static const char *const yes[] = {"true", "yes", "1"};
    static const char *const no[] = {"false", "no", "0"};
    for (int i = 0; i < 3; i++) {
        if (text_equals_ignoring_case(v, yes[i]) || text_equals_ignoring_case(v, no[i])) {
            *out = text_equals_ignoring_case(v, yes[i]);
            return 0;
        }
    }
    return -1;
}

static int set_bool(struct case_builder *b, const char *v, const struct where *at)
{
    int x;
    if (parse_bool(v, &x))
        return bad_value(at, v);
    *int_field(&b->c, at->spec) = x;
    return ST_OK;
}

/* Dropout's range is half-open (p = 1 drops everything), so not generic. */
static int set_dropout(struct case_builder *b, const char *v, const struct where *at)
{
    double p;
    if (text_parse_real(v, 0.0, 1.0, &p) || p >= 1.0)
        return bad_value(at, v);
    b->c.dropout = p;
    return ST_OK;
}

static int set_model(struct case_builder *b, const char *v, const struct where *at)
{
    int k = text_name_index(model_names, v);
    if (k < 0)
        return bad_value(at, v);
    b->c.model = (enum model_kind)k;
    return ST_OK;
}

static int set_fusion(struct case_builder *b, const char *v, const struct where *at)
{
    int k = text_name_index(fusion_names, v);
    if (k < 0)
        return bad_value(at, v);
    b->c.fusion = (enum fusion_kind)k;
    return ST_OK;
}

static int set_rng_devices(struct case_builder *b, const char *v, const struct where *at)
{
    int k = text_name_index(rng_devices_names, v);
    if (k < 0)
        k = text_name_index(rng_policy_names, v);
    if (k < 0)
        return bad_value(at, v);
    b->c.rng_devices = (enum rng_devices)k;
    return ST_OK;
}

static int set_determinism_check(struct case_builder *b, const char *v, const struct where *at)
{
    int k = text_name_index(determinism_check_names, v);
    if (k < 0)
        return bad_value(at, v);
    b->c.determinism_check = (enum determinism_check)k;
    return ST_OK;
}

static int set_backward(struct case_builder *b, const char *v, const struct where *at)
{
    int k = text_name_index(backward_api_names, v);
    if (k < 0)
        return bad_value(at, v);
    b->c.backward = (enum backward_api)k;
    return ST_OK;
}

/* verify_values is the older spelling of determinism_check: true is
 * `values`, false `metadata`; both keys set the same field, the later line
 * wins. */
static int set_verify_values(struct case_builder *b, const char *v, const struct where *at)
{
    int values;
    if (parse_bool(v, &values))
        return bad_value(at, v);
    b->c.determinism_check = values ? DETERMINISM_VALUES : DETERMINISM_METADATA;
    return ST_OK;
}

/* Also takes the dtype spellings (bfloat16, fp16, ...), since people write
 * the autocast dtype the way they write `dtype`. */
static int set_autocast(struct case_builder *b, const char *v, const struct where *at)
{
    int k = text_name_index(autocast_names, v);
    if (k < 0) {
        int d = dtype_from_name(v);
        k = d == DT_BF16 ? AUTOCAST_BF16 : d == DT_F16 ? AUTOCAST_F16 : -1;
    }
    if (k < 0)
        return bad_value(at, v);
    b->c.autocast = (enum autocast_kind)k;
    return ST_OK;
}

/* Only the float types the models train in; compare measures them in ULP. */
static int set_dtype(struct case_builder *b, const char *v, const struct where *at)
{
    int d = dtype_from_name(v);
    if (d != DT_F32 && d != DT_BF16 && d != DT_F16)
        return bad_value(at, v);
    b->c.dtype = d;
    return ST_OK;
}

static int is_device_syntax(const char *v)
{
    long index;
    return strcmp(v, "cpu") == 0 || strcmp(v, "cuda") == 0 ||
           (strncmp(v, "cuda:", 5) == 0 && isdigit((unsigned char)v[5]) &&
            text_parse_long(v + 5, 0, MAX_DEVICE_INDEX, &index) == 0);
}

/* A text field set whole: the bytes after the terminator are zero too, so
 * two cases with the same values are the same bytes (a later value shorter
 * than an earlier one would otherwise leave its tail behind). */
static void set_text(char *field, size_t cap, const char *v)
{
    memset(field, 0, cap);
    snprintf(field, cap, "%s", v);
}

/* Syntax only: whether the device exists is for the runner to say. */
static int set_device(struct case_builder *b, const char *v, const struct where *at)
{
    if (!is_device_syntax(v) || strlen(v) >= sizeof b->c.device)
        return bad_value(at, v);
    set_text(b->c.device, sizeof b->c.device, v);
    return ST_OK;
}

/* The syntax and the op names; whether the model runs those ops is checked
 * with the other keys (policy_check_case). */
static int set_policy(struct case_builder *b, const char *v, const struct where *at)
{
    if (strcmp(v, "none") == 0) {
        set_text(b->c.policy, sizeof b->c.policy, "");
        return ST_OK;
    }
    unsigned keep;
    char why[320];
    if (strlen(v) >= sizeof b->c.policy)
        return bad_value(at, v);
    if (policy_parse(v, &keep, why, sizeof why))
        return error_set(ST_INPUT, "%s:%d: bad value '%s' for '%s' in %s: %s", at->file, at->line, v, at->key,
                         at->section, why);
    set_text(b->c.policy, sizeof b->c.policy, v);
    return ST_OK;
}

static int set_draw_device(struct case_builder *b, const char *v, const struct where *at)
{
    if (strcmp(v, "same") == 0) {
        set_text(b->c.draw_device, sizeof b->c.draw_device, "");
        return ST_OK;
    }
    if (!is_device_syntax(v) || strlen(v) >= sizeof b->c.draw_device)
        return bad_value(at, v);
    set_text(b->c.draw_device, sizeof b->c.draw_device, v);
    return ST_OK;
}

static int set_seed(struct case_builder *b, const char *v, const struct where *at)
{
    if (!isdigit((unsigned char)v[0]))
        return bad_value(at, v);
    char *end;
    errno = 0;
    unsigned long long seed = strtoull(v, &end, 10);
    if (errno || *end) /* unsigned long long is at least 64 bits: ERANGE is the limit */
        return bad_value(at, v);
    b->c.seed = (uint64_t)seed;
    return ST_OK;
}

static int set_segments(struct case_builder *b, const char *v, const struct where *at)
{
    long n = 0;
    int sqrt_of_layers = strcmp(v, "sqrt") == 0;
    if (!sqrt_of_layers && strcmp(v, "every") != 0 && text_parse_long(v, 1, MAX_LAYERS, &n))
        return bad_value(at, v);
    b->c.segments = (int)n; /* 0 = every layer its own segment */
    b->segments_sqrt = sqrt_of_layers;
    return ST_OK;
}

/* A fraction, or "none" (stored as -1: no requirement). */
static int set_min_memory_saving(struct case_builder *b, const char *v, const struct where *at)
{
    double x = -1.0;
    if (strcmp(v, "none") != 0 && text_parse_real(v, 0.0, 1.0, &x))
        return bad_value(at, v);
    b->c.min_memory_saving = x;
    return ST_OK;
}

static int set_min_held_cut(struct case_builder *b, const char *v, const struct where *at)
{
    double x = -1.0;
    if (strcmp(v, "none") != 0 && text_parse_real(v, 0.0, 1.0, &x))
        return bad_value(at, v);
    b->c.min_held_cut = x;
    return ST_OK;
}

/* A comma list of distinct words, each passing `is_ok`, into out[0..*count).
 * An empty value is the empty list. */
static int parse_word_list(const char *value, char (*out)[CASE_WORD_MAX], int max,
                           int (*is_ok)(const char *), const struct where *at, int *count)
{
    const char *cursor = text_list_start(value);
    struct span item;
    int n = 0;
    while (text_next_item(&cursor, ',', &item)) {
        /* Zeroed: the whole slot is copied below, and cases compare bytewise. */
        char word[CASE_WORD_MAX] = "";
        if (text_span_copy(item, word, sizeof word) || !is_ok(word))
            return bad_item(at, item);
        if (n == max)
            return error_set(ST_INPUT, "%s:%d: too many items in '%s' in %s (at most %d)",
                             at->file, at->line, at->key, at->section, max);
        for (int i = 0; i < n; i++)
            if (strcmp(out[i], word) == 0)
                return error_set(ST_INPUT, "%s:%d: '%s' is listed twice in '%s' in %s",
                                 at->file, at->line, word, at->key, at->section);
        memcpy(out[n++], word, sizeof word);
    }
    *count = n;
    return ST_OK;
}

static int set_impls(struct case_builder *b, const char *v, const struct where *at)
{
    char impls[CASE_MAX_IMPLS][CASE_WORD_MAX] = {{0}};
    int n = 0;
    int rc = parse_word_list(v, impls, CASE_MAX_IMPLS, text_is_impl_name, at, &n);
    if (rc != ST_OK)
        return rc;
    if (n == 0) /* a case that runs nothing cannot verify anything */
        return bad_value(at, v);
    memcpy(b->c.impls, impls, sizeof impls);
    b->c.n_impls = n;
    return ST_OK;
}

static int set_labels(struct case_builder *b, const char *v, const struct where *at)
{
    char labels[CASE_MAX_LABELS][CASE_WORD_MAX] = {{0}};
    int n = 0;
    int rc = parse_word_list(v, labels, CASE_MAX_LABELS, text_is_label_name, at, &n);
    if (rc != ST_OK)
        return rc;
    memcpy(b->c.labels, labels, sizeof labels);
    b->c.n_labels = n;
    return ST_OK;
}

/* "impl:VERDICT[|VERDICT...]" */
static int parse_expectation(struct span item, struct impl_expectation *e, const struct where *at)
{
    const char *colon = memchr(item.p, ':', item.n);
    if (!colon)
        return bad_item(at, item);
    struct span impl = text_trim(item.p, (size_t)(colon - item.p));
    if (text_span_copy(impl, e->impl, sizeof e->impl) || !text_is_impl_name(e->impl))
        return bad_item(at, item);

    char verdicts[256];
    struct span rest = {colon + 1, item.n - (size_t)(colon + 1 - item.p)};
    const char *cursor = text_span_copy(rest, verdicts, sizeof verdicts) ? NULL : text_list_start(verdicts);
    if (!cursor)
        return bad_item(at, item);
    struct span verdict;
    e->verdict_mask = 0;
    while (text_next_item(&cursor, '|', &verdict)) {
        char name[32];
        int v = text_span_copy(verdict, name, sizeof name) ? -1 : verdict_from_name(name);
        if (v < 0)
            return error_set(ST_INPUT,
                             "%s:%d: unknown verdict '%.*s' in '%s' in %s: expected PASS, NOISE, "
                             "FAIL, MEMFAIL, ERROR or NOT_OBSERVABLE",
                             at->file, at->line, (int)verdict.n, verdict.p, at->key, at->section);
        e->verdict_mask |= 1u << v;
    }
    return ST_OK;
}

static int set_expect(struct case_builder *b, const char *v, const struct where *at)
{
    struct impl_expectation expect[CASE_MAX_IMPLS];
    memset(expect, 0, sizeof expect);
    const char *cursor = text_list_start(v);
    struct span item;
    int n = 0;
    while (text_next_item(&cursor, ',', &item)) {
        if (n == CASE_MAX_IMPLS)
            return error_set(ST_INPUT, "%s:%d: too many items in '%s' in %s (at most %d)",
                             at->file, at->line, at->key, at->section, CASE_MAX_IMPLS);
        int rc = parse_expectation(item, &expect[n], at);
        if (rc != ST_OK)
            return rc;
        for (int i = 0; i < n; i++)
            if (strcmp(expect[i].impl, expect[n].impl) == 0)
                return error_set(ST_INPUT, "%s:%d: impl '%s' appears twice in '%s' in %s",
                                 at->file, at->line, expect[n].impl, at->key, at->section);
        n++;
    }
    memcpy(b->c.expect, expect, sizeof expect);
    b->c.n_expect = n;
    return ST_OK;
}

static void format_int(const struct ckpt_case *c, const struct key_spec *spec, char *buf, size_t n)
{
    snprintf(buf, n, "%d", *const_int_field(c, spec));
}

static void format_real(const struct ckpt_case *c, const struct key_spec *spec, char *buf, size_t n)
{
    text_format_real(*(const double *)((const char *)c + spec->offset), buf, n);
}

static void format_bool(const struct ckpt_case *c, const struct key_spec *spec, char *buf, size_t n)
{
    snprintf(buf, n, "%s", *const_int_field(c, spec) ? "true" : "false");
}

static void format_verify_values(const struct ckpt_case *c, const struct key_spec *spec, char *buf,
                                 size_t n)
{
    (void)spec;
    snprintf(buf, n, "%s", c->determinism_check == DETERMINISM_VALUES ? "true" : "false");
}

static void format_determinism_check(const struct ckpt_case *c, const struct key_spec *spec, char *buf,
                                     size_t n)
{
    (void)spec;
    snprintf(buf, n, "%s", determinism_check_names[c->determinism_check]);
}

static void format_backward(const struct ckpt_case *c, const struct key_spec *spec, char *buf, size_t n)
{
    (void)spec;
    snprintf(buf, n, "%s", backward_api_names[c->backward]);
}

static void format_model(const struct ckpt_case *c, const struct key_spec *spec, char *buf, size_t n)
{
    (void)spec;
    snprintf(buf, n, "%s", model_names[c->model]);
}

static void format_fusion(const struct ckpt_case *c, const struct key_spec *spec, char *buf, size_t n)
{
    (void)spec;
    snprintf(buf, n, "%s", fusion_names[c->fusion]);
}

static void format_autocast(const struct ckpt_case *c, const struct key_spec *spec, char *buf,
                            size_t n)
{
    (void)spec;
    snprintf(buf, n, "%s", autocast_names[c->autocast]);
}

static void format_rng_devices(const struct ckpt_case *c, const struct key_spec *spec, char *buf,
                               size_t n)
{
    (void)spec;
    snprintf(buf, n, "%s", rng_devices_names[c->rng_devices]);
}

static void format_dtype(const struct ckpt_case *c, const struct key_spec *spec, char *buf, size_t n)
{
    (void)spec;
    snprintf(buf, n, "%s", dtype_name((enum dtype)c->dtype));
}

static void format_device(const struct ckpt_case *c, const struct key_spec *spec, char *buf, size_t n)
{
    (void)spec;
    snprintf(buf, n, "%s", c->device);
}

static void format_policy(const struct ckpt_case *c, const struct key_spec *spec, char *buf, size_t n)
{
    (void)spec;
    snprintf(buf, n, "%s", c->policy[0] ? c->policy : "none");
}

static void format_draw_device(const struct ckpt_case *c, const struct key_spec *spec, char *buf,
                               size_t n)
{
    (void)spec;
    snprintf(buf, n, "%s", c->draw_device[0] ? c->draw_device : "same");
}

static void format_seed(const struct ckpt_case *c, const struct key_spec *spec, char *buf, size_t n)
{
    (void)spec;
    snprintf(buf, n, "%" PRIu64, c->seed);
}

static void format_segments(const struct ckpt_case *c, const struct key_spec *spec, char *buf,
                            size_t n)
{
    (void)spec;
    if (c->segments == 0)
        snprintf(buf, n, "every");
    else
        snprintf(buf, n, "%d", c->segments);
}

static void format_min_memory_saving(const struct ckpt_case *c, const struct key_spec *spec,
                                     char *buf, size_t n)
{
    (void)spec;
    if (c->min_memory_saving < 0)
        snprintf(buf, n, "none");
    else
        text_format_real(c->min_memory_saving, buf, n);
}

static void format_min_held_cut(const struct ckpt_case *c, const struct key_spec *spec, char *buf, size_t n)
{
    (void)spec;
    if (c->min_held_cut < 0)
        snprintf(buf, n, "none");
    else
        text_format_real(c->min_held_cut, buf, n);
}

void case_format_words(const char (*words)[CASE_WORD_MAX], int count, char *buf, size_t n)
{
    buf[0] = '\0';
    for (int i = 0; i < count; i++) {
        if (i)
            text_buf_append(buf, n, ",");
        text_buf_append(buf, n, words[i]);
    }
}

static void format_impls(const struct ckpt_case *c, const struct key_spec *spec, char *buf, size_t n)
{
    (void)spec;
    case_format_words(c->impls, c->n_impls, buf, n);
}

static void format_labels(const struct ckpt_case *c, const struct key_spec *spec, char *buf, size_t n)
{
    (void)spec;
    case_format_words(c->labels, c->n_labels, buf, n);
}

static void format_expect(const struct ckpt_case *c, const struct key_spec *spec, char *buf, size_t n)
{
    (void)spec;
    buf[0] = '\0';
    for (int i = 0; i < c->n_expect; i++) {
        text_buf_append(buf, n, i ? "," : "");
        text_buf_append(buf, n, c->expect[i].impl);
        const char *sep = ":";
        for (int v = 0; v < V_COUNT; v++) {
            if (c->expect[i].verdict_mask & (1u << v)) {
                text_buf_append(buf, n, sep);
                text_buf_append(buf, n, verdict_name((enum verdict)v));
                sep = "|";
            }
        }
    }
}

#define FIELD(f) offsetof(struct ckpt_case, f)

/* Ordered as cases/README.md lists them; attributes come out in this order. */
static const struct key_spec key_specs[K_COUNT] = {
    [K_MODEL] = {.name = "model", .parse = set_model, .format = format_model,
                 .allowed = "one of mlp, gpt_block, branchy, rrelu_mlp, bn_mlp, scaled_mlp, two_stream"},
    [K_LAYERS] = {.name = "layers", .parse = set_int, .format = format_int,
                  .offset = FIELD(layers), .min = 1, .max = MAX_LAYERS,
                  .allowed = "an integer 1..1024"},
    [K_HIDDEN] = {.name = "hidden", .parse = set_int, .format = format_int,
                  .offset = FIELD(hidden), .min = 1, .max = MAX_DIM,
                  .allowed = "an integer 1..65536"},
    [K_SEQ] = {.name = "seq", .parse = set_int, .format = format_int, .offset = FIELD(seq),
               .min = 1, .max = MAX_DIM, .allowed = "an integer 1..65536"},
    [K_BATCH] = {.name = "batch", .parse = set_int, .format = format_int,
                 .offset = FIELD(batch), .min = 1, .max = MAX_DIM,
                 .allowed = "an integer 1..65536"},
    [K_HEADS] = {.name = "heads", .parse = set_int, .format = format_int,
                 .offset = FIELD(heads), .min = 1, .max = MAX_DIM,
                 .allowed = "an integer 1..65536"},
    [K_DROPOUT] = {.name = "dropout", .parse = set_dropout, .format = format_real,
                   .offset = FIELD(dropout), .allowed = "a probability 0 <= p < 1"},
    [K_DTYPE] = {.name = "dtype", .parse = set_dtype, .format = format_dtype,
                 .allowed = "one of float32 (fp32, f32), bfloat16 (bf16), float16 (fp16, f16, half)"},
    [K_AUTOCAST] = {.name = "autocast", .parse = set_autocast, .format = format_autocast,
                    .allowed = "one of off, bf16, f16"},
    [K_FUSION] = {.name = "fusion", .parse = set_fusion, .format = format_fusion,
                  .allowed = "one of none, bias_gelu, bias_gelu_atomic"},
    [K_DEVICE] = {.name = "device", .parse = set_device, .format = format_device,
                  .allowed = "cpu, cuda or cuda:N (N 0..1023)"},
    [K_DRAW_DEVICE] = {.name = "draw_device", .parse = set_draw_device, .format = format_draw_device,
                       .allowed = "same, cpu, cuda or cuda:N (N 0..1023)"},
    [K_STEPS] = {.name = "steps", .parse = set_int, .format = format_int,
                 .offset = FIELD(steps), .min = 1, .max = MAX_STEPS,
                 .allowed = "an integer 1..100000"},
    [K_SEED] = {.name = "seed", .parse = set_seed, .format = format_seed,
                .allowed = "an unsigned 64-bit decimal integer"},
    [K_SEGMENTS] = {.name = "segments", .parse = set_segments, .format = format_segments,
                    .allowed = "an integer 1..layers, every or sqrt"},
    [K_LR] = {.name = "lr", .parse = set_real, .format = format_real, .offset = FIELD(lr),
              .min = 0, .max = DBL_MAX, .allowed = "a number >= 0"},
    [K_TOLERANCE] = {.name = "tolerance", .parse = set_real, .format = format_real,
                     .offset = FIELD(tolerance), .min = 0, .max = DBL_MAX,
                     .allowed = "a number of ULP >= 0"},
    [K_MIN_MEMORY_SAVING] = {.name = "min_memory_saving", .parse = set_min_memory_saving,
                             .format = format_min_memory_saving,
                             .allowed = "a fraction 0..1 or none"},
    [K_MIN_HELD_CUT] = {.name = "min_held_cut", .parse = set_min_held_cut, .format = format_min_held_cut,
                        .allowed = "a fraction 0..1 or none"},
    [K_PRESERVE_RNG_STATE] = {.name = "preserve_rng_state", .parse = set_bool,
                              .format = format_bool, .offset = FIELD(preserve_rng_state),
                              .allowed = "true, false, yes, no, 1 or 0"},
    [K_INPUT_REQUIRES_GRAD] = {.name = "input_requires_grad", .parse = set_bool,
                               .format = format_bool, .offset = FIELD(input_requires_grad),
                               .allowed = "true, false, yes, no, 1 or 0"},
    [K_VERIFY_VALUES] = {.name = "verify_values", .parse = set_verify_values, .format = format_verify_values,
                         .allowed = "true, false, yes, no, 1 or 0"},
    [K_DETERMINISM_CHECK] = {.name = "determinism_check", .parse = set_determinism_check,
                             .format = format_determinism_check, .allowed = "one of none, metadata, values"},
    [K_EARLY_STOP] = {.name = "early_stop", .parse = set_bool, .format = format_bool, .offset = FIELD(early_stop),
                      .allowed = "true, false, yes, no, 1 or 0"},
    [K_BACKWARD] = {.name = "backward", .parse = set_backward, .format = format_backward,
                    .allowed = "one of loss, grad, inputs, twice"},
    [K_RNG_DEVICES] = {.name = "rng_devices", .parse = set_rng_devices, .format = format_rng_devices,
                       .allowed = "one of args+current, args"},
    [K_NOISE_RUNS] = {.name = "noise_runs", .parse = set_int, .format = format_int,
                      .offset = FIELD(noise_runs), .min = 0, .max = MAX_NOISE_RUNS,
                      .allowed = "an integer 0..1000"},
    [K_THREADS] = {.name = "threads", .parse = set_int, .format = format_int,
                   .offset = FIELD(threads), .min = 0, .max = MAX_THREADS,
                   .allowed = "an integer 0..1024 (0 = libtorch's default)"},
    [K_NEST] = {.name = "nest", .parse = set_int, .format = format_int, .offset = FIELD(nest), .min = 1,
                .max = CASE_MAX_NEST, .allowed = "an integer 1..8 (checkpoints nested around each segment)"},
    [K_POLICY] = {.name = "policy", .parse = set_policy, .format = format_policy,
                  .allowed = "none, save_matmuls, attention_core or save:op,op,..."},
    [K_IMPLS] = {.name = "impls", .parse = set_impls, .format = format_impls, .is_list = 1,
                 .allowed = "a comma list of 1..16 distinct impl names (letters, digits, _)"},
    [K_EXPECT] = {.name = "expect", .parse = set_expect, .format = format_expect, .is_list = 1,
                  .allowed = "a comma list of impl:VERDICT[|VERDICT...]"},
    [K_LABELS] = {.name = "labels", .parse = set_labels, .format = format_labels, .is_list = 1,
                  .allowed = "a comma list of up to 8 distinct labels (letters, digits, _, -)"},
};

const struct key_spec *case_key_find(const char *name)
{
    /* rng_devices was called rng_policy; files written with it still load. */
    if (strcmp(name, "rng_policy") == 0)
        return &key_specs[K_RNG_DEVICES];
    for (int k = 0; k < K_COUNT; k++)
        if (strcmp(key_specs[k].name, name) == 0)
            return &key_specs[k];
    return NULL;
}

static const char *nearest_key(const char *typed)
{
    const char *best = NULL;
    int best_distance = INT_MAX;
    for (int k = 0; k < K_COUNT; k++) {
        int d = text_edit_distance(typed, key_specs[k].name);
        if (d < best_distance) {
            best_distance = d;
            best = key_specs[k].name;
        }
    }
    return text_is_near_miss(typed, best_distance) ? best : NULL;
}

/* `prefix` is "axis." when the unknown name followed it. */
int case_key_unknown(const char *file, int line, const char *section, const char *prefix,
                     const char *name)
{
    const char *guess = nearest_key(name);
    if (guess)
        return error_set(ST_INPUT, "%s:%d: unknown key '%s%s' in %s (did you mean '%s%s'?)", file,
                         line, prefix, name, section, prefix, guess);
    return error_set(ST_INPUT, "%s:%d: unknown key '%s%s' in %s (the keys are listed in "
                     "cases/README.md)", file, line, prefix, name, section);
}

enum key_id case_key_id(const struct key_spec *spec) { return (enum key_id)(spec - key_specs); }

int case_key_apply(struct case_builder *b, const struct where *at, const char *value)
{
    int rc = at->spec->parse(b, value, at);
    if (rc == ST_OK)
        b->set_at[at->spec - key_specs] = at->line;
    return rc;
}

/* ------------------------------------------------------------------ */
/* Defaults                                                             */

void case_defaults(struct ckpt_case *c)
{
    memset(c, 0, sizeof *c); /* also clears unused list slots: cases compare bytewise */
    c->model = MODEL_MLP;
    c->layers = 4;
    c->hidden = 64;
    c->seq = 8;
    c->batch = 4;
    c->heads = 4;
    c->dropout = 0.1;
    c->dtype = DT_F32;
    c->autocast = AUTOCAST_OFF;
    c->fusion = FUSION_NONE;
    snprintf(c->device, sizeof c->device, "cpu");
    c->steps = 2;
    c->seed = 1234;
    c->segments = 0;
    c->lr = 0.01;
    c->tolerance = 0.0;
    c->min_memory_saving = -1.0;
    c->min_held_cut = -1.0;
    c->preserve_rng_state = 1;
    c->input_requires_grad = 1;
    c->rng_devices = RNG_ARGS_AND_CURRENT;
    c->noise_runs = 4;
    c->determinism_check = DETERMINISM_METADATA;
    c->early_stop = 1;
    c->threads = 0;
    c->nest = 1;
    c->n_impls = 2;
    snprintf(c->impls[0], sizeof c->impls[0], "reentrant");
    snprintf(c->impls[1], sizeof c->impls[1], "nonreentrant");
}

void case_builder_defaults(struct case_builder *b)
{
    memset(b, 0, sizeof *b);
    case_defaults(&b->c);
}

int case_model_from_name(const char *name) { return text_name_index(model_names, name); }
int case_fusion_from_name(const char *name) { return text_name_index(fusion_names, name); }
int case_autocast_from_name(const char *name) { return text_name_index(autocast_names, name); }

const char *case_model_name(enum model_kind kind)
{
    return kind >= MODEL_MLP && kind <= MODEL_TWO_STREAM ? model_names[kind] : "?";
}

enum case_value_kind case_value_kind(const char *value, long long *i, double *d)
{
    char *end;
    errno = 0;
    *i = strtoll(value, &end, 10);
    if (*value && !*end && !errno)
        return CASE_VALUE_INT;
    *d = strtod(value, &end);
    if (*value && !*end && isfinite(*d) && strpbrk(value, ".eE"))
        return CASE_VALUE_REAL;
    return CASE_VALUE_TEXT;
}

/* Values print the way a case file writes them, so the attributes of a
 * case, pasted under a [case:NAME] header, load back as the same case. */
void case_foreach_attr(const struct ckpt_case *c,
                       void (*fn)(void *ctx, const char *key, const char *value), void *ctx)
{
    char value[CASE_MAX_IMPLS * (CASE_WORD_MAX + 64)];
    fn(ctx, "name", c->name);
    fn(ctx, "file", c->file);
    snprintf(value, sizeof value, "%d", c->line);
    fn(ctx, "line", value);
    for (int k = 0; k < K_COUNT; k++) {
        key_specs[k].format(c, &key_specs[k], value, sizeof value);
        fn(ctx, key_specs[k].name, value);
    }
}
