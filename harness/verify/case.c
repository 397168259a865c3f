/* case: loads INI case files (cases/NAME.ini) into resolved case definitions.
 *
 * A file is handled in two phases, so that every message can name a line:
 *   1. read:  inih splits lines into comments, section headers and
 *             key = value pairs. It is fed by our own line reader, which
 *             counts lines and records section headers itself, because the
 *             installed inih has no line-number handler, cuts section names
 *             at 49 characters and says nothing about a section with no keys.
 *             The result is a list of sections, each with its (key, value,
 *             line) entries.
 *   2. build: [defaults] sections update the file's running defaults; a
 *             [case:NAME] becomes one case; a [sweep:NAME] becomes the
 *             cartesian product of its axis.KEY lists, named by its `name`
 *             pattern.
 * A file or directory is loaded into a scratch list that is merged into the
 * caller's list only when all of it is valid: a failed load changes nothing.
 *
 * The key table (key_specs) is the one place that says how each key is
 * parsed, what it allows (for messages) and how it prints (for attributes);
 * cases/README.md documents the same keys for people.
 */
#define _POSIX_C_SOURCE 200809L

#include "case.h"

#include "dtype.h"
#include "error.h"
#include "case_policy.h"

#include <ini.h>

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum {
    MAX_LAYERS = 1024,
    MAX_DIM = 65536,        /* hidden, seq, batch, heads */
    MAX_STEPS = 100000,
    MAX_NOISE_RUNS = 1000,
    MAX_THREADS = 1024,
    MAX_DEVICE_INDEX = 1023,
    MAX_AXIS_VALUES = 256,
    MAX_SWEEP_CASES = 10000, /* a typo in an axis should not allocate gigabytes */
    MAX_TOTAL_CASES = 20000, /* all files together: checked before a sweep expands, so many
                                large sweeps fail at once instead of after minutes of loading */
    MAX_FILE_BYTES = 16 << 20,
    SHOWN_LINE_MAX = 80,    /* how much of a bad line a syntax error quotes */
};

/* ------------------------------------------------------------------ */
/* Verdicts                                                             */

static const char *const verdict_names[V_COUNT] = {
    "PASS", "NOISE", "FAIL", "MEMFAIL", "ERROR", "NOT_OBSERVABLE",
};

const char *verdict_name(enum verdict v) { return (unsigned)v < V_COUNT ? verdict_names[v] : "?"; }

int verdict_from_name(const char *name)
{
    for (int v = 0; v < V_COUNT; v++)
        if (strcmp(name, verdict_names[v]) == 0)
            return v;
    return -1;
}

/* ------------------------------------------------------------------ */
/* Small string helpers                                                 */

/* A piece of a longer string (not NUL-terminated). */
struct span {
    const char *p;
    size_t n;
};

static struct span trim_span(const char *p, size_t n)
{
    while (n && isspace((unsigned char)p[0])) {
        p++;
        n--;
    }
    while (n && isspace((unsigned char)p[n - 1]))
        n--;
    return (struct span){p, n};
}

/* Where a list starts: NULL for a blank value, so that "" is the empty list
 * and not a list holding one empty item. */
static const char *list_start(const char *value)
{
    return trim_span(value, strlen(value)).n ? value : NULL;
}

/* The next `sep`-separated item, trimmed; *cursor becomes NULL after the
 * last one. "a,,b" yields an empty middle item, which callers reject. */
static int next_item(const char **cursor, char sep, struct span *item)
{
    const char *p = *cursor;
    if (!p)
        return 0;
    const char *end = strchr(p, sep);
    *item = trim_span(p, end ? (size_t)(end - p) : strlen(p));
    *cursor = end ? end + 1 : NULL;
    return 1;
}

/* Copies a span into a NUL-terminated buffer; -1 if it does not fit. */
static int span_copy(struct span s, char *dst, size_t cap)
{
    if (s.n >= cap)
        return -1;
    memcpy(dst, s.p, s.n);
    dst[s.n] = '\0';
    return 0;
}

static int is_ascii_alnum(char ch) { return isalnum((unsigned char)ch) && (unsigned char)ch < 128; }

/* Non-empty, letters and digits plus the characters in `extra`. */
static int is_word(const char *s, const char *extra)
{
    if (!*s)
        return 0;
    for (; *s; s++)
        if (!is_ascii_alnum(*s) && !strchr(extra, *s))
            return 0;
    return 1;
}

/* Case names become file names, CTest test names and HDF5 attributes, so
 * they keep to characters that need no quoting anywhere. */
static int is_case_name(const char *s)
{
    return (is_ascii_alnum(s[0]) || s[0] == '_') && is_word(s, "_.-");
}

static int is_impl_name(const char *s) { return is_word(s, "_"); }
static int is_label_name(const char *s) { return is_word(s, "_-"); }

static int equals_ignoring_case(const char *a, const char *b)
{
    for (; *a && *b; a++, b++)
        if (tolower((unsigned char)*a) != tolower((unsigned char)*b))
            return 0;
    return *a == *b;
}

/* Levenshtein distance; `b` is a known name (case or key), so its length is
 * bounded and one row buffer on the stack is enough. */
static int edit_distance(const char *a, const char *b)
{
    int row[CASE_NAME_MAX + 1];
    int nb = (int)strlen(b);
    if (nb > CASE_NAME_MAX)
        return INT_MAX / 2;
    for (int j = 0; j <= nb; j++)
        row[j] = j;
    for (int i = 1; a[i - 1]; i++) {
        int diagonal = row[0];
        row[0] = i;
        for (int j = 1; j <= nb; j++) {
            int above = row[j];
            int substitute = diagonal + (a[i - 1] != b[j - 1]);
            int best = above + 1 < row[j - 1] + 1 ? above + 1 : row[j - 1] + 1;
            row[j] = substitute < best ? substitute : best;
            diagonal = above;
        }
    }
    return row[nb];
}

/* Close enough to suggest: a few edits, scaled with the length typed. */
static int is_near_miss(const char *typed, int distance)
{
    int allowed = (int)strlen(typed) / 3;
    return distance <= (allowed > 2 ? allowed : 2);
}

/* Whole-string decimal integer in [min, max]: no '+', no blanks, no tail. */
static int parse_long(const char *s, long min, long max, long *out)
{
    if (!(isdigit((unsigned char)s[0]) || (s[0] == '-' && isdigit((unsigned char)s[1]))))
        return -1;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

/* Whole-string finite number in [min, max]. */
static int parse_real(const char *s, double min, double max, double *out)
{
    if (!*s || isspace((unsigned char)s[0]))
        return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !isfinite(v) || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

/* Shortest text that reads back as the same double ("0.01", not
 * "0.010000000000000000208"), so attributes stay readable and exact. */
static void format_real_value(double x, char *buf, size_t n)
{
    for (int digits = 6; digits <= 17; digits++) {
        snprintf(buf, n, "%.*g", digits, x);
        if (strtod(buf, NULL) == x)
            return;
    }
}

static int name_index(const char *const *names, const char *name)
{
    for (int i = 0; names[i]; i++)
        if (strcmp(names[i], name) == 0)
            return i;
    return -1;
}

/* ------------------------------------------------------------------ */
/* Keys                                                                 */

/* Indexed like enum model_kind, enum fusion_kind, ... */
static const char *const model_names[] = {"mlp", "gpt_block", "branchy", "rrelu_mlp", "bn_mlp", "scaled_mlp",
                                           "two_stream", NULL};
static const char *const fusion_names[] = {"none", "bias_gelu", "bias_gelu_atomic", NULL};
static const char *const autocast_names[] = {"off", "bf16", "f16", NULL};
static const char *const rng_devices_names[] = {"args+current", "args", NULL};
/* The spellings of the key's former name, rng_policy (still read). */
static const char *const determinism_check_names[] = {"metadata", "values", "none", NULL};
static const char *const rng_policy_names[] = {"args_and_current", "args_only", NULL};
static const char *const backward_api_names[] = {"loss", "grad", "inputs", "twice", NULL};

int backward_calls_per_step(enum backward_api api) { return api == BACKWARD_TWICE ? 2 : 1; }

enum key_id {
    K_MODEL, K_LAYERS, K_HIDDEN, K_SEQ, K_BATCH, K_HEADS, K_DROPOUT, K_DTYPE,
    K_AUTOCAST, K_FUSION, K_DEVICE, K_DRAW_DEVICE, K_STEPS, K_SEED, K_SEGMENTS, K_LR,
    K_TOLERANCE, K_MIN_MEMORY_SAVING, K_PRESERVE_RNG_STATE,
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
    if (parse_long(v, (long)at->spec->min, (long)at->spec->max, &x))
        return bad_value(at, v);
    *int_field(&b->c, at->spec) = (int)x;
    return ST_OK;
}

static int set_real(struct case_builder *b, const char *v, const struct where *at)
{
    double x;
    if (parse_real(v, at->spec->min, at->spec->max, &x))
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
        if (equals_ignoring_case(v, yes[i]) || equals_ignoring_case(v, no[i])) {
            *out = equals_ignoring_case(v, yes[i]);
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
    if (parse_real(v, 0.0, 1.0, &p) || p >= 1.0)
        return bad_value(at, v);
    b->c.dropout = p;
    return ST_OK;
}

static int set_model(struct case_builder *b, const char *v, const struct where *at)
{
    int k = name_index(model_names, v);
    if (k < 0)
        return bad_value(at, v);
    b->c.model = (enum model_kind)k;
    return ST_OK;
}

static int set_fusion(struct case_builder *b, const char *v, const struct where *at)
{
    int k = name_index(fusion_names, v);
    if (k < 0)
        return bad_value(at, v);
    b->c.fusion = (enum fusion_kind)k;
    return ST_OK;
}

static int set_rng_devices(struct case_builder *b, const char *v, const struct where *at)
{
    int k = name_index(rng_devices_names, v);
    if (k < 0)
        k = name_index(rng_policy_names, v);
    if (k < 0)
        return bad_value(at, v);
    b->c.rng_devices = (enum rng_devices)k;
    return ST_OK;
}

static int set_determinism_check(struct case_builder *b, const char *v, const struct where *at)
{
    int k = name_index(determinism_check_names, v);
    if (k < 0)
        return bad_value(at, v);
    b->c.determinism_check = (enum determinism_check)k;
    return ST_OK;
}

static int set_backward(struct case_builder *b, const char *v, const struct where *at)
{
    int k = name_index(backward_api_names, v);
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
    int k = name_index(autocast_names, v);
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
            parse_long(v + 5, 0, MAX_DEVICE_INDEX, &index) == 0);
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
    if (!sqrt_of_layers && strcmp(v, "every") != 0 && parse_long(v, 1, MAX_LAYERS, &n))
        return bad_value(at, v);
    b->c.segments = (int)n; /* 0 = every layer its own segment */
    b->segments_sqrt = sqrt_of_layers;
    return ST_OK;
}

/* A fraction, or "none" (stored as -1: no requirement). */
static int set_min_memory_saving(struct case_builder *b, const char *v, const struct where *at)
{
    double x = -1.0;
    if (strcmp(v, "none") != 0 && parse_real(v, 0.0, 1.0, &x))
        return bad_value(at, v);
    b->c.min_memory_saving = x;
    return ST_OK;
}

/* A comma list of distinct words, each passing `is_ok`, into out[0..*count).
 * An empty value is the empty list. */
static int parse_word_list(const char *value, char (*out)[CASE_WORD_MAX], int max,
                           int (*is_ok)(const char *), const struct where *at, int *count)
{
    const char *cursor = list_start(value);
    struct span item;
    int n = 0;
    while (next_item(&cursor, ',', &item)) {
        /* Zeroed: the whole slot is copied below, and cases compare bytewise. */
        char word[CASE_WORD_MAX] = "";
        if (span_copy(item, word, sizeof word) || !is_ok(word))
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
    int rc = parse_word_list(v, impls, CASE_MAX_IMPLS, is_impl_name, at, &n);
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
    int rc = parse_word_list(v, labels, CASE_MAX_LABELS, is_label_name, at, &n);
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
    struct span impl = trim_span(item.p, (size_t)(colon - item.p));
    if (span_copy(impl, e->impl, sizeof e->impl) || !is_impl_name(e->impl))
        return bad_item(at, item);

    char verdicts[256];
    struct span rest = {colon + 1, item.n - (size_t)(colon + 1 - item.p)};
    const char *cursor = span_copy(rest, verdicts, sizeof verdicts) ? NULL : list_start(verdicts);
    if (!cursor)
        return bad_item(at, item);
    struct span verdict;
    e->verdict_mask = 0;
    while (next_item(&cursor, '|', &verdict)) {
        char name[32];
        int v = span_copy(verdict, name, sizeof name) ? -1 : verdict_from_name(name);
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
    const char *cursor = list_start(v);
    struct span item;
    int n = 0;
    while (next_item(&cursor, ',', &item)) {
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
    format_real_value(*(const double *)((const char *)c + spec->offset), buf, n);
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
        format_real_value(c->min_memory_saving, buf, n);
}

/* Appends to a NUL-terminated buffer, truncating quietly (the buffers are
 * sized for the largest list a case can hold). */
static void append(char *buf, size_t n, const char *text)
{
    size_t used = strlen(buf);
    if (used + 1 < n)
        snprintf(buf + used, n - used, "%s", text);
}

static void format_words(const char (*words)[CASE_WORD_MAX], int count, char *buf, size_t n)
{
    buf[0] = '\0';
    for (int i = 0; i < count; i++) {
        if (i)
            append(buf, n, ",");
        append(buf, n, words[i]);
    }
}

static void format_impls(const struct ckpt_case *c, const struct key_spec *spec, char *buf, size_t n)
{
    (void)spec;
    format_words(c->impls, c->n_impls, buf, n);
}

static void format_labels(const struct ckpt_case *c, const struct key_spec *spec, char *buf, size_t n)
{
    (void)spec;
    format_words(c->labels, c->n_labels, buf, n);
}

static void format_expect(const struct ckpt_case *c, const struct key_spec *spec, char *buf, size_t n)
{
    (void)spec;
    buf[0] = '\0';
    for (int i = 0; i < c->n_expect; i++) {
        append(buf, n, i ? "," : "");
        append(buf, n, c->expect[i].impl);
        const char *sep = ":";
        for (int v = 0; v < V_COUNT; v++) {
            if (c->expect[i].verdict_mask & (1u << v)) {
                append(buf, n, sep);
                append(buf, n, verdict_names[v]);
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

static const struct key_spec *find_key(const char *name)
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
        int d = edit_distance(typed, key_specs[k].name);
        if (d < best_distance) {
            best_distance = d;
            best = key_specs[k].name;
        }
    }
    return is_near_miss(typed, best_distance) ? best : NULL;
}

/* `prefix` is "axis." when the unknown name followed it. */
static int unknown_key(const char *file, int line, const char *section, const char *prefix,
                       const char *name)
{
    const char *guess = nearest_key(name);
    if (guess)
        return error_set(ST_INPUT, "%s:%d: unknown key '%s%s' in %s (did you mean '%s%s'?)", file,
                         line, prefix, name, section, prefix, guess);
    return error_set(ST_INPUT, "%s:%d: unknown key '%s%s' in %s (the keys are listed in "
                     "cases/README.md)", file, line, prefix, name, section);
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

static void builder_defaults(struct case_builder *b)
{
    memset(b, 0, sizeof *b);
    case_defaults(&b->c);
}

/* ------------------------------------------------------------------ */
/* Phase 1: read the file into sections of (key, value, line) entries   */

enum section_kind { SECTION_DEFAULTS, SECTION_CASE, SECTION_SWEEP };

struct ini_entry {
    char *key, *value;
    int line;
};

struct ini_section {
    enum section_kind kind;
    char name[CASE_NAME_MAX];
    char title[CASE_NAME_MAX + 16]; /* "[sweep:name]", for messages */
    int line;
    int n_entries, cap_entries;
    struct ini_entry *entries;
};

struct ini_doc {
    int n_sections, cap_sections;
    struct ini_section *sections;
};

static void ini_doc_free(struct ini_doc *doc)
{
    for (int s = 0; s < doc->n_sections; s++) {
        struct ini_section *section = &doc->sections[s];
        for (int e = 0; e < section->n_entries; e++) {
            free(section->entries[e].key);
            free(section->entries[e].value);
        }
        free(section->entries);
    }
    free(doc->sections);
    memset(doc, 0, sizeof *doc);
}

/* Grows *items (of `size` bytes each) to hold one more; 0 on success. */
static int grow(void **items, int *capacity, int count, size_t size)
{
    if (count < *capacity)
        return 0;
    int wanted = *capacity ? *capacity * 2 : 8;
    if (wanted <= *capacity || (size_t)wanted > SIZE_MAX / size)
        return -1;
    void *bigger = realloc(*items, (size_t)wanted * size);
    if (!bigger)
        return -1;
    *items = bigger;
    *capacity = wanted;
    return 0;
}

/* Feeds inih one line at a time from the file's text. */
struct line_reader {
    const char *path;
    const char *text;
    size_t size, pos;
    int lineno;       /* lines handed to inih: the line inih is working on */
    int status;       /* our own first error; it stops the reading */
    int error_line;
    struct ini_doc *doc;
};

static char *stop_reading(struct line_reader *r, int status)
{
    r->status = status;
    r->error_line = r->lineno;
    return NULL;
}

static int add_section(struct line_reader *r, enum section_kind kind, const char *name)
{
    struct ini_doc *doc = r->doc;
    if (grow((void **)&doc->sections, &doc->cap_sections, doc->n_sections, sizeof *doc->sections))
        return error_set(ST_INTERNAL, "%s:%d: out of memory", r->path, r->lineno);
    struct ini_section *s = &doc->sections[doc->n_sections++];
    memset(s, 0, sizeof *s);
    s->kind = kind;
    s->line = r->lineno;
    snprintf(s->name, sizeof s->name, "%s", name);
    if (kind == SECTION_DEFAULTS)
        snprintf(s->title, sizeof s->title, "[defaults]");
    else
        snprintf(s->title, sizeof s->title, "[%s:%s]", kind == SECTION_CASE ? "case" : "sweep",
                 name);
    return ST_OK;
}

/* A "[...]" line as inih will read it: the header ends at the first ']'
 * before any " ;" comment. Returns the end, or NULL when inih will call the
 * line a syntax error (which it then reports with its line number). */
static const char *section_header_end(const char *line)
{
    int was_space = 0;
    for (const char *p = line + 1; *p; p++) {
        if (*p == ']')
            return p;
        if (was_space && *p == ';')
            return NULL;
        was_space = isspace((unsigned char)*p);
    }
    return NULL;
}

/* Records the section a "[...]" line opens; an error status if the header
 * is not one of ours. */
static int note_section(struct line_reader *r, const char *line)
{
    const char *end = section_header_end(line);
    if (!end)
        return ST_OK;
    struct span after = trim_span(end + 1, strlen(end + 1));
    if (after.n && after.p[0] != ';' && after.p[0] != '#')
        return error_set(ST_INPUT, "%s:%d: unexpected text '%.*s' after section header", r->path,
                         r->lineno, (int)after.n, after.p);

    struct span title = trim_span(line + 1, (size_t)(end - line - 1));
    char header[CASE_NAME_MAX + 16];
    if (span_copy(title, header, sizeof header))
        return error_set(ST_INPUT, "%s:%d: section name is too long (at most %d characters)",
                         r->path, r->lineno, CASE_NAME_MAX - 1);
    if (strcmp(header, "defaults") == 0)
        return add_section(r, SECTION_DEFAULTS, "");

    enum section_kind kind;
    const char *name;
    if (strncmp(header, "case:", 5) == 0) {
        kind = SECTION_CASE;
        name = header + 5;
    } else if (strncmp(header, "sweep:", 6) == 0) {
        kind = SECTION_SWEEP;
        name = header + 6;
    } else {
        return error_set(ST_INPUT, "%s:%d: unknown section '[%s]' (expected [defaults], "
                         "[case:NAME] or [sweep:NAME])", r->path, r->lineno, header);
    }
    if (strlen(name) >= CASE_NAME_MAX)
        return error_set(ST_INPUT, "%s:%d: name '%s' is too long (at most %d characters)",
                         r->path, r->lineno, name, CASE_NAME_MAX - 1);
    if (!is_case_name(name))
        return error_set(ST_INPUT, "%s:%d: bad name '%s' in section '[%s]': use letters, digits, "
                         "'_', '-' and '.', starting with a letter, digit or '_'",
                         r->path, r->lineno, name, header);
    return add_section(r, kind, name);
}

/* inih's ini_reader: one line per call, so inih's line count stays ours. */
static char *read_line(char *out, int cap, void *stream)
{
    struct line_reader *r = stream;
    if (r->status != ST_OK || r->pos >= r->size)
        return NULL;
    const char *start = r->text + r->pos;
    const char *newline = memchr(start, '\n', r->size - r->pos);
    size_t len = newline ? (size_t)(newline - start) : r->size - r->pos;
    r->pos += len + (newline != NULL);
    r->lineno++;

    if (memchr(start, '\0', len))
        return stop_reading(r, error_set(ST_INPUT, "%s:%d: NUL byte in line (not a text file?)",
                                         r->path, r->lineno));
    if (r->lineno == 1 && len >= 3 && memcmp(start, "\xEF\xBB\xBF", 3) == 0) {
        start += 3; /* a UTF-8 byte-order mark */
        len -= 3;
    }
    /* inih reads an indented line as the continuation of the previous value;
     * case files have one line per key, so indentation is only layout. */
    struct span line = trim_span(start, len);
    if (line.n + 2 > (size_t)cap)
        return stop_reading(r, error_set(ST_INPUT, "%s:%d: line is too long (%zu characters, at "
                                         "most %d)", r->path, r->lineno, line.n, cap - 2));
    memcpy(out, line.p, line.n);
    out[line.n] = '\n';
    out[line.n + 1] = '\0';
    if (out[0] == '[') {
        int rc = note_section(r, out);
        if (rc != ST_OK)
            return stop_reading(r, rc);
    }
    return out;
}

static int add_entry(struct line_reader *r, const char *key, const char *value)
{
    struct ini_section *s = &r->doc->sections[r->doc->n_sections - 1];
    if (grow((void **)&s->entries, &s->cap_entries, s->n_entries, sizeof *s->entries))
        return error_set(ST_INTERNAL, "%s:%d: out of memory", r->path, r->lineno);
    struct ini_entry *e = &s->entries[s->n_entries];
    e->key = strdup(key);
    e->value = strdup(value);
    e->line = r->lineno;
    if (!e->key || !e->value) {
        free(e->key);
        free(e->value);
        return error_set(ST_INTERNAL, "%s:%d: out of memory", r->path, r->lineno);
    }
    s->n_entries++;
    return ST_OK;
}

/* inih's handler. Always returns 1: our errors are kept in the reader,
 * with their own line, and stop the reading at the next line. */
static int on_key_value(void *user, const char *section, const char *key, const char *value)
{
    struct line_reader *r = user;
    (void)section; /* ours is the full name; inih's is cut at 49 characters */
    if (r->status != ST_OK)
        return 1;
    if (r->doc->n_sections == 0) {
        stop_reading(r, error_set(ST_INPUT, "%s:%d: key '%s' before any section (put it under "
                                  "[defaults] or [case:NAME])", r->path, r->lineno, key));
        return 1;
    }
    const struct ini_section *s = &r->doc->sections[r->doc->n_sections - 1];
    for (int e = 0; e < s->n_entries; e++) {
        if (strcmp(s->entries[e].key, key) == 0) {
            stop_reading(r, error_set(ST_INPUT, "%s:%d: key '%s' repeated in %s (first set at "
                                      "line %d)", r->path, r->lineno, key, s->title,
                                      s->entries[e].line));
            return 1;
        }
    }
    int rc = add_entry(r, key, value ? value : "");
    if (rc != ST_OK)
        stop_reading(r, rc);
    return 1;
}

/* The trimmed text of line `number`, shortened for a message. */
static void line_text(const char *text, size_t size, int number, char *out, size_t cap)
{
    size_t pos = 0;
    for (int line = 1; line < number && pos < size; line++) {
        const char *newline = memchr(text + pos, '\n', size - pos);
        pos = newline ? (size_t)(newline - text) + 1 : size;
    }
    const char *newline = memchr(text + pos, '\n', size - pos);
    struct span s = trim_span(text + pos, newline ? (size_t)(newline - text) - pos : size - pos);
    if (s.n >= cap)
        s.n = cap - 1;
    memcpy(out, s.p, s.n);
    out[s.n] = '\0';
}

static int syntax_error(const char *path, const char *text, size_t size, int line)
{
    char shown[SHOWN_LINE_MAX + 1];
    line_text(text, size, line, shown, sizeof shown);
    if (shown[0] == '[')
        return error_set(ST_INPUT, "%s:%d: syntax error: section header '%s' has no closing ']'",
                         path, line, shown);
    return error_set(ST_INPUT, "%s:%d: syntax error: '%s' is not 'key = value', '[section]' or a "
                     "';' comment", path, line, shown);
}

static int read_text(const char *path, char **text, size_t *size)
{
    /* A FIFO or device would block the open or the read for ever. */
    struct stat sb;
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode))
        return error_set(ST_INPUT, "%s: not a regular file (a case file is read as one)", path);
    FILE *f = fopen(path, "rb");
    if (!f)
        return error_set(ST_INPUT, "%s: cannot open case file: %s", path, strerror(errno));
    size_t cap = 4096, used = 0;
    char *buf = malloc(cap);
    int rc = buf ? ST_OK : error_set(ST_INTERNAL, "%s: out of memory", path);
    while (rc == ST_OK) {
        used += fread(buf + used, 1, cap - used, f);
        if (used < cap)
            break;
        if (cap >= MAX_FILE_BYTES) {
            rc = error_set(ST_INPUT, "%s: case file is larger than %d bytes", path, MAX_FILE_BYTES);
            break;
        }
        char *bigger = realloc(buf, cap * 2);
        if (!bigger) {
            rc = error_set(ST_INTERNAL, "%s: out of memory", path);
            break;
        }
        buf = bigger;
        cap *= 2;
    }
    if (rc == ST_OK && ferror(f))
        rc = error_set(ST_INPUT, "%s: cannot read case file: %s", path, strerror(errno));
    fclose(f);
    if (rc != ST_OK) {
        free(buf);
        return rc;
    }
    *text = buf;
    *size = used;
    return ST_OK;
}

static int read_doc(const char *path, struct ini_doc *doc)
{
    char *text = NULL;
    size_t size = 0;
    int rc = read_text(path, &text, &size);
    if (rc != ST_OK)
        return rc;
    struct line_reader r = {.path = path, .text = text, .size = size, .doc = doc};
    int first_bad_line = ini_parse_stream(read_line, &r, on_key_value, &r);
    /* inih keeps going after a syntax error, we stop at ours: the earlier
     * of the two is the one to report. */
    if (first_bad_line > 0 && (r.status == ST_OK || first_bad_line < r.error_line))
        rc = syntax_error(path, text, size, first_bad_line);
    else if (first_bad_line < 0 && r.status == ST_OK)
        rc = error_set(ST_INTERNAL, "%s: inih failed (%d)", path, first_bad_line);
    else
        rc = r.status;
    free(text);
    return rc;
}

/* ------------------------------------------------------------------ */
/* Case lists                                                           */

static int reserve(struct case_list *list, int extra)
{
    if (extra > INT_MAX - list->count)
        return error_set(ST_INTERNAL, "too many cases");
    int needed = list->count + extra;
    if (needed <= list->capacity)
        return ST_OK;
    int capacity = list->capacity ? list->capacity : 16;
    while (capacity < needed)
        capacity = capacity > INT_MAX / 2 ? needed : capacity * 2;
    if ((size_t)capacity > SIZE_MAX / sizeof *list->items)
        return error_set(ST_INTERNAL, "too many cases");
    struct ckpt_case *bigger = realloc(list->items, (size_t)capacity * sizeof *bigger);
    if (!bigger)
        return error_set(ST_INTERNAL, "out of memory for %d cases", capacity);
    list->items = bigger;
    list->capacity = capacity;
    return ST_OK;
}

void case_list_free(struct case_list *list)
{
    free(list->items);
    memset(list, 0, sizeof *list);
}

const struct ckpt_case *case_list_find(const struct case_list *list, const char *name)
{
    for (int i = 0; i < list->count; i++)
        if (strcmp(list->items[i].name, name) == 0)
            return &list->items[i];
    return NULL;
}

/* Appends `c` unless its name is taken in `loaded` (the caller's list) or in
 * `scratch` (what this load has produced so far). */
static int add_unique(struct case_list *scratch, const struct case_list *loaded,
                      const struct ckpt_case *c)
{
    const struct ckpt_case *other = case_list_find(loaded, c->name);
    if (!other)
        other = case_list_find(scratch, c->name);
    if (other)
        return error_set(ST_INPUT, "%s:%d: duplicate case name '%s' (first defined at %s:%d)",
                         c->file, c->line, c->name, other->file, other->line);
    int rc = reserve(scratch, 1);
    if (rc != ST_OK)
        return rc;
    scratch->items[scratch->count++] = *c;
    return ST_OK;
}

static int append_all(struct case_list *list, const struct case_list *more)
{
    int rc = reserve(list, more->count);
    if (rc != ST_OK)
        return rc;
    if (more->count)
        memcpy(list->items + list->count, more->items, (size_t)more->count * sizeof *more->items);
    list->count += more->count;
    return ST_OK;
}

/* ------------------------------------------------------------------ */
/* Phase 2: build cases from sections                                   */

/* What building one file needs: its running defaults and both lists that
 * names must be unique in. */
struct file_build {
    const char *path;
    struct case_builder defaults;
    struct case_list *scratch;
    const struct case_list *loaded;
};

static int is_sweep_only_key(const char *key)
{
    return strcmp(key, "name") == 0 || strncmp(key, "axis.", 5) == 0 ||
           strncmp(key, "label.", 6) == 0;
}

static int apply_value(struct case_builder *b, const struct where *at, const char *value)
{
    int rc = at->spec->parse(b, value, at);
    if (rc == ST_OK)
        b->set_at[at->spec - key_specs] = at->line;
    return rc;
}

/* Applies one plain `key = value` entry of a section. */
static int apply_entry(struct case_builder *b, const struct file_build *fb,
                       const struct ini_section *s, const struct ini_entry *e)
{
    if (is_sweep_only_key(e->key) && s->kind != SECTION_SWEEP)
        return error_set(ST_INPUT, "%s:%d: key '%s' is only allowed in [sweep:NAME] sections "
                         "(a case is named by its section)", fb->path, e->line, e->key);
    const struct key_spec *spec = find_key(e->key);
    if (!spec)
        return unknown_key(fb->path, e->line, s->title, "", e->key);
    struct where at = {fb->path, e->line, s->title, e->key, spec};
    return apply_value(b, &at, e->value);
}

/* The line to blame for a conflict between keys: the last of them set, or
 * the section when all come from the built-in defaults. */
static int latest_line(const struct case_builder *b, int section_line, const enum key_id *keys,
                       int n)
{
    int line = 0;
    for (int i = 0; i < n; i++)
        if (b->set_at[keys[i]] > line)
            line = b->set_at[keys[i]];
    return line ? line : section_line;
}

static int has_impl(const struct ckpt_case *c, const char *impl)
{
    for (int i = 0; i < c->n_impls; i++)
        if (strcmp(c->impls[i], impl) == 0)
            return 1;
    return 0;
}

/* The models with buffers run unfused, without autocast, in float32
 * (bn_mlp with more than one value per channel, as batch norm in training
 * demands). */
static int check_stateful_model(const struct case_builder *b, const char *path, int section_line)
{
    const struct ckpt_case *c = &b->c;
    const char *model = model_names[c->model];
    if (c->fusion != FUSION_NONE) {
        int line = latest_line(b, section_line, (enum key_id[]){K_MODEL, K_FUSION}, 2);
        return error_set(ST_INPUT, "%s:%d: case '%s': model %s runs unfused (fusion = none)", path, line, c->name,
                         model);
    }
    if (c->autocast != AUTOCAST_OFF) {
        int line = latest_line(b, section_line, (enum key_id[]){K_MODEL, K_AUTOCAST}, 2);
        return error_set(ST_INPUT, "%s:%d: case '%s': model %s runs without autocast", path, line, c->name, model);
    }
    if (c->dtype != DT_F32) {
        int line = latest_line(b, section_line, (enum key_id[]){K_MODEL, K_DTYPE}, 2);
        return error_set(ST_INPUT, "%s:%d: case '%s': model %s runs in float32 (scaled_mlp rounds to bfloat16 "
                         "inside its quantiser), not %s", path, line, c->name, model, dtype_name((enum dtype)c->dtype));
    }
    if (c->model == MODEL_BN_MLP && (int64_t)c->batch * c->seq < 2) {
        int line = latest_line(b, section_line, (enum key_id[]){K_MODEL, K_BATCH, K_SEQ}, 3);
        return error_set(ST_INPUT, "%s:%d: case '%s': model bn_mlp normalises over batch x seq = 1 value per "
                         "channel; batch norm in training needs more than one", path, line, c->name);
    }
    return ST_OK;
}

int case_model_from_name(const char *name) { return name_index(model_names, name); }
int case_fusion_from_name(const char *name) { return name_index(fusion_names, name); }
int case_autocast_from_name(const char *name) { return name_index(autocast_names, name); }

const char *case_model_name(enum model_kind kind)
{
    return kind >= MODEL_MLP && kind <= MODEL_TWO_STREAM ? model_names[kind] : "?";
}

/* Checks that span keys (a single key's range is checked when it is set). */
static int check_consistency(const struct case_builder *b, const char *path, int section_line)
{
    const struct ckpt_case *c = &b->c;
    if (c->model == MODEL_GPT_BLOCK && c->hidden % c->heads != 0) {
        int line = latest_line(b, section_line, (enum key_id[]){K_MODEL, K_HIDDEN, K_HEADS}, 3);
        return error_set(ST_INPUT, "%s:%d: case '%s': hidden (%d) must be a multiple of heads "
                         "(%d) for model gpt_block", path, line, c->name, c->hidden, c->heads);
    }
    if (c->draw_device[0] && c->model != MODEL_MLP) {
        int line = latest_line(b, section_line, (enum key_id[]){K_MODEL, K_DRAW_DEVICE}, 2);
        return error_set(ST_INPUT, "%s:%d: case '%s': draw_device is only supported for model mlp", path,
                         line, c->name);
    }
    if ((c->model == MODEL_BN_MLP || c->model == MODEL_SCALED_MLP) && check_stateful_model(b, path, section_line))
        return ST_INPUT;
    if (c->segments > c->layers) {
        int line = latest_line(b, section_line, (enum key_id[]){K_SEGMENTS, K_LAYERS}, 2);
        return error_set(ST_INPUT, "%s:%d: case '%s': segments (%d) exceeds layers (%d)", path,
                         line, c->name, c->segments, c->layers);
    }
    int policy_line = latest_line(b, section_line, (enum key_id[]){K_POLICY, K_IMPLS, K_MODEL, K_FUSION}, 4);
    if (policy_check_case(c, path, policy_line))
        return ST_INPUT;
    for (int i = 0; i < c->n_expect; i++) {
        if (!has_impl(c, c->expect[i].impl)) {
            int line = latest_line(b, section_line, (enum key_id[]){K_EXPECT, K_IMPLS}, 2);
            char impls[CASE_MAX_IMPLS * CASE_WORD_MAX];
            format_words(c->impls, c->n_impls, impls,
                         sizeof impls);
            return error_set(ST_INPUT, "%s:%d: case '%s': expect names impl '%s', which is not in "
                             "impls (%s)", path, line, c->name, c->expect[i].impl, impls);
        }
    }
    return ST_OK;
}

/* Names and places the case, resolves what depends on other keys, checks
 * the keys against each other and adds it to the file's cases. */
static int finish_case(struct case_builder *b, const struct file_build *fb,
                       const struct ini_section *s, const char *name)
{
    struct ckpt_case *c = &b->c;
    snprintf(c->name, sizeof c->name, "%s", name);
    snprintf(c->file, sizeof c->file, "%s", fb->path);
    c->line = s->line;
    if (b->segments_sqrt) {
        long rounded = lround(sqrt((double)c->layers));
        c->segments = rounded < 1 ? 1 : (int)rounded;
    }
    int rc = check_consistency(b, fb->path, s->line);
    return rc != ST_OK ? rc : add_unique(fb->scratch, fb->loaded, c);
}

static int build_defaults(struct file_build *fb, const struct ini_section *s)
{
    for (int e = 0; e < s->n_entries; e++) {
        int rc = apply_entry(&fb->defaults, fb, s, &s->entries[e]);
        if (rc != ST_OK)
            return rc;
    }
    return ST_OK;
}

static int build_case(struct file_build *fb, const struct ini_section *s)
{
    struct case_builder b = fb->defaults;
    for (int e = 0; e < s->n_entries; e++) {
        int rc = apply_entry(&b, fb, s, &s->entries[e]);
        if (rc != ST_OK)
            return rc;
    }
    return finish_case(&b, fb, s, s->name);
}

/* ---- a case from recorded attributes ---- */

struct case_from_attrs {
    struct case_builder b;
    const char *source;
    int has_impls;
};

int case_attrs_begin(struct case_from_attrs **out, const char *source)
{
    struct case_from_attrs *a = calloc(1, sizeof *a);
    if (!a)
        return error_set(ST_INTERNAL, "out of memory reading the case of %s", source);
    builder_defaults(&a->b);
    a->source = source;
    *out = a;
    return ST_OK;
}

int case_attrs_apply(void *ctx, const char *key, const char *value)
{
    struct case_from_attrs *a = ctx;
    struct ckpt_case *c = &a->b.c;
    if (strcmp(key, "name") == 0) {
        snprintf(c->name, sizeof c->name, "%s", value);
        return ST_OK;
    }
    if (strcmp(key, "file") == 0) {
        snprintf(c->file, sizeof c->file, "%s", value);
        return ST_OK;
    }
    if (strcmp(key, "line") == 0) {
        long line;
        c->line = parse_long(value, 0, INT_MAX, &line) == ST_OK ? (int)line : 0;
        return ST_OK;
    }
    const struct key_spec *spec = find_key(key);
    if (!spec)
        return ST_OK; /* another producer's own attribute */
    struct where at = {a->source, 0, "/case", key, spec};
    a->has_impls |= spec == &key_specs[K_IMPLS];
    if (apply_value(&a->b, &at, value) != ST_OK)
        return error_set(ST_INPUT, "%s: /case: attribute %s: bad value '%s': expected %s", a->source, key, value,
                         spec->allowed);
    return ST_OK;
}

int case_attrs_finish(struct case_from_attrs *a, struct ckpt_case *out)
{
    /* Another producer's file names its runs only in expect (if at all):
     * those are the case's impls, not the harness's default pair. */
    if (!a->has_impls) {
        struct ckpt_case *c = &a->b.c;
        c->n_impls = c->n_expect;
        for (int i = 0; i < c->n_expect; i++)
            snprintf(c->impls[i], sizeof c->impls[i], "%s", c->expect[i].impl);
    }
    int rc = check_consistency(&a->b, a->source, 0);
    if (rc == ST_OK)
        *out = a->b.c;
    free(a);
    return rc;
}

/* ---- sweeps ---- */

struct sweep_axis {
    const struct ini_entry *entry; /* axis.KEY = v1, v2, ... */
    const struct key_spec *spec;
    char *text;                    /* a copy of the value, cut into values in place */
    int n_values;
    char *values[MAX_AXIS_VALUES];
};

struct sweep_plan {
    const struct ini_entry *pattern; /* name = ... */
    int n_axes;
    struct sweep_axis axes[K_COUNT];
    int n_label_entries;
    const struct ini_entry *label_entries[MAX_AXIS_VALUES]; /* label.X = case names */
    struct case_builder base;        /* defaults plus the sweep's plain keys */
};

static void sweep_plan_free(struct sweep_plan *plan)
{
    for (int a = 0; a < plan->n_axes; a++)
        free(plan->axes[a].text);
    free(plan);
}

static const struct sweep_axis *find_axis(const struct sweep_plan *plan, const char *key, size_t n)
{
    for (int a = 0; a < plan->n_axes; a++)
        if (strlen(plan->axes[a].spec->name) == n && strncmp(plan->axes[a].spec->name, key, n) == 0)
            return &plan->axes[a];
    return NULL;
}

/* Cuts an axis value list into trimmed, distinct, non-empty values. */
static int split_axis(struct sweep_axis *axis, const struct file_build *fb,
                      const struct ini_section *s)
{
    const struct ini_entry *e = axis->entry;
    axis->text = strdup(e->value);
    if (!axis->text)
        return error_set(ST_INTERNAL, "%s:%d: out of memory", fb->path, e->line);
    const char *cursor = list_start(axis->text);
    if (!cursor)
        return error_set(ST_INPUT, "%s:%d: '%s' in %s is empty: a sweep must expand to at "
                         "least one case", fb->path, e->line, e->key, s->title);
    struct span item;
    while (next_item(&cursor, ',', &item)) {
        if (item.n == 0)
            return error_set(ST_INPUT, "%s:%d: empty value in '%s' in %s ('%s')", fb->path,
                             e->line, e->key, s->title, e->value);
        if (axis->n_values == MAX_AXIS_VALUES)
            return error_set(ST_INPUT, "%s:%d: '%s' has more than %d values", fb->path,
                             e->line, e->key, MAX_AXIS_VALUES);
        char *value = (char *)item.p; /* our copy: cut it in place */
        value[item.n] = '\0';
        for (int v = 0; v < axis->n_values; v++)
            if (strcmp(axis->values[v], value) == 0)
                return error_set(ST_INPUT, "%s:%d: value '%s' repeated in '%s' in %s",
                                 fb->path, e->line, value, e->key, s->title);
        axis->values[axis->n_values++] = value;
    }
    return ST_OK;
}

static int add_axis(struct sweep_plan *plan, const struct file_build *fb,
                    const struct ini_section *s, const struct ini_entry *e)
{
    const char *key = e->key + strlen("axis.");
    const struct key_spec *spec = find_key(key);
    if (!spec)
        return unknown_key(fb->path, e->line, s->title, "axis.", key);
    if (spec->is_list)
        return error_set(ST_INPUT, "%s:%d: '%s' cannot be a sweep axis: its value is itself a "
                         "comma list", fb->path, e->line, key);
    struct sweep_axis *axis = &plan->axes[plan->n_axes++];
    axis->entry = e;
    axis->spec = spec;
    return split_axis(axis, fb, s);
}

/* Sorts a sweep's entries into pattern, axes, label lists and plain keys
 * (applied to the sweep's base case at once, so their errors come first). */
static int plan_entries(struct sweep_plan *plan, const struct file_build *fb,
                        const struct ini_section *s)
{
    for (int i = 0; i < s->n_entries; i++) {
        const struct ini_entry *e = &s->entries[i];
        int rc = ST_OK;
        if (strcmp(e->key, "name") == 0) {
            plan->pattern = e;
        } else if (strncmp(e->key, "axis.", 5) == 0) {
            rc = add_axis(plan, fb, s, e);
        } else if (strncmp(e->key, "label.", 6) == 0) {
            if (!is_label_name(e->key + 6))
                return error_set(ST_INPUT, "%s:%d: bad label '%s' in key '%s': use letters, "
                                 "digits, '_' and '-'", fb->path, e->line, e->key + 6, e->key);
            if (plan->n_label_entries == MAX_AXIS_VALUES)
                return error_set(ST_INPUT, "%s:%d: too many label.* keys", fb->path, e->line);
            plan->label_entries[plan->n_label_entries++] = e;
        } else {
            rc = apply_entry(&plan->base, fb, s, e);
        }
        if (rc != ST_OK)
            return rc;
    }
    return ST_OK;
}

/* A key both plain and swept would be silently overridden by the axis. */
static int check_axes_not_set_plainly(const struct sweep_plan *plan, const struct file_build *fb,
                                      const struct ini_section *s)
{
    for (int a = 0; a < plan->n_axes; a++) {
        for (int i = 0; i < s->n_entries; i++) {
            if (strcmp(s->entries[i].key, plan->axes[a].spec->name) == 0)
                return error_set(ST_INPUT, "%s:%d: '%s' is set both as a plain key (line %d) "
                                 "and as '%s' in %s", fb->path, plan->axes[a].entry->line,
                                 s->entries[i].key, s->entries[i].line,
                                 plan->axes[a].entry->key, s->title);
        }
    }
    return ST_OK;
}

static void axis_names(const struct sweep_plan *plan, char *buf, size_t n)
{
    buf[0] = '\0';
    for (int a = 0; a < plan->n_axes; a++) {
        append(buf, n, a ? ", " : "");
        append(buf, n, plan->axes[a].spec->name);
    }
}

/* Every {placeholder} must be an axis, and every axis with more than one
 * value must appear, or the expanded names would repeat. */
static int check_pattern(const struct sweep_plan *plan, const struct file_build *fb,
                         const struct ini_section *s)
{
    const struct ini_entry *e = plan->pattern;
    int used[K_COUNT] = {0};
    for (const char *p = strchr(e->value, '{'); p; p = strchr(p, '{')) {
        const char *close = strchr(p, '}');
        if (!close)
            return error_set(ST_INPUT, "%s:%d: name pattern '%s' has a '{' without '}'",
                             fb->path, e->line, e->value);
        const struct sweep_axis *axis = find_axis(plan, p + 1, (size_t)(close - p - 1));
        if (!axis) {
            char axes[K_COUNT * 24];
            axis_names(plan, axes, sizeof axes);
            return error_set(ST_INPUT, "%s:%d: placeholder '%.*s' in name pattern '%s' is not an "
                             "axis of %s (axes: %s)", fb->path, e->line, (int)(close - p + 1), p,
                             e->value, s->title, axes);
        }
        used[axis - plan->axes] = 1;
        p = close + 1;
    }
    for (int a = 0; a < plan->n_axes; a++)
        if (!used[a] && plan->axes[a].n_values > 1)
            return error_set(ST_INPUT, "%s:%d: name pattern '%s' does not use axis '%s', so the "
                             "names of %s would repeat", fb->path, e->line, e->value,
                             plan->axes[a].spec->name, s->title);
    return ST_OK;
}

static int check_plan(const struct sweep_plan *plan, const struct file_build *fb,
                      const struct ini_section *s)
{
    if (!plan->pattern)
        return error_set(ST_INPUT, "%s:%d: %s has no 'name' pattern (for example name = "
                         "{fusion}_bs{batch})", fb->path, s->line, s->title);
    if (plan->n_axes == 0)
        return error_set(ST_INPUT, "%s:%d: %s has no axis.KEY lists; a single case is a "
                         "[case:NAME] section", fb->path, s->line, s->title);
    long total = 1;
    for (int a = 0; a < plan->n_axes; a++) {
        total *= plan->axes[a].n_values;
        if (total > MAX_SWEEP_CASES)
            return error_set(ST_INPUT, "%s:%d: %s expands to more than %d cases", fb->path,
                             s->line, s->title, MAX_SWEEP_CASES);
    }
    long before = (long)fb->loaded->count + fb->scratch->count;
    if (before + total > MAX_TOTAL_CASES)
        return error_set(ST_INPUT, "%s:%d: %s expands to %ld cases, more than the %d loaded cases allowed in all "
                         "(%ld already)", fb->path, s->line, s->title, total, MAX_TOTAL_CASES, before);
    int rc = check_axes_not_set_plainly(plan, fb, s);
    return rc != ST_OK ? rc : check_pattern(plan, fb, s);
}

/* The pattern with each {key} replaced by that axis's current value, as
 * written (so segments = sqrt gives "mlp_segsqrt"). */
static int render_name(const struct sweep_plan *plan, const int *choice, const struct file_build *fb,
                       char *name, size_t cap)
{
    const struct ini_entry *e = plan->pattern;
    size_t used = 0;
    for (const char *p = e->value; *p;) {
        const char *piece = p;
        size_t n = 1;
        if (*p == '{') {
            const char *close = strchr(p, '}');
            const struct sweep_axis *axis = find_axis(plan, p + 1, (size_t)(close - p - 1));
            piece = axis->values[choice[axis - plan->axes]];
            n = strlen(piece);
            p = close + 1;
        } else {
            p++;
        }
        if (used + n >= cap)
            return error_set(ST_INPUT, "%s:%d: name pattern '%s' gives a name longer than %zu "
                             "characters", fb->path, e->line, e->value, cap - 1);
        memcpy(name + used, piece, n);
        used += n;
    }
    name[used] = '\0';
    if (!is_case_name(name))
        return error_set(ST_INPUT, "%s:%d: name pattern '%s' gives '%s', which is not a valid case "
                         "name (letters, digits, '_', '-', '.')", fb->path, e->line, e->value, name);
    return ST_OK;
}

static int build_sweep_member(const struct sweep_plan *plan, const int *choice,
                              const struct file_build *fb, const struct ini_section *s)
{
    struct case_builder b = plan->base;
    for (int a = 0; a < plan->n_axes; a++) {
        const struct sweep_axis *axis = &plan->axes[a];
        struct where at = {fb->path, axis->entry->line, s->title, axis->entry->key, axis->spec};
        int rc = apply_value(&b, &at, axis->values[choice[a]]);
        if (rc != ST_OK)
            return rc;
    }
    char name[CASE_NAME_MAX];
    int rc = render_name(plan, choice, fb, name, sizeof name);
    return rc != ST_OK ? rc : finish_case(&b, fb, s, name);
}

/* Walks the cartesian product like an odometer: the last axis turns
 * fastest, so the first axis written varies slowest. */
static int expand_sweep(const struct sweep_plan *plan, const struct file_build *fb,
                        const struct ini_section *s)
{
    int choice[K_COUNT] = {0};
    for (;;) {
        int rc = build_sweep_member(plan, choice, fb, s);
        if (rc != ST_OK)
            return rc;
        int a = plan->n_axes - 1;
        while (a >= 0 && ++choice[a] == plan->axes[a].n_values)
            choice[a--] = 0;
        if (a < 0)
            return ST_OK;
    }
}

static int add_label(struct ckpt_case *c, const char *label, const char *path, int line)
{
    for (int i = 0; i < c->n_labels; i++)
        if (strcmp(c->labels[i], label) == 0)
            return ST_OK;
    if (c->n_labels == CASE_MAX_LABELS)
        return error_set(ST_INPUT, "%s:%d: case '%s' would have more than %d labels", path, line,
                         c->name, CASE_MAX_LABELS);
    snprintf(c->labels[c->n_labels++], CASE_WORD_MAX, "%s", label);
    return ST_OK;
}

/* "label.smoke = a, b" adds label smoke to the sweep's cases a and b: the
 * way to pick a few members of a sweep for a smaller suite. */
static int apply_label_entry(const struct ini_entry *e, const struct file_build *fb,
                             const struct ini_section *s, int first_member)
{
    const char *label = e->key + strlen("label.");
    const char *cursor = list_start(e->value);
    struct span item;
    while (next_item(&cursor, ',', &item)) {
        struct ckpt_case *member = NULL;
        for (int i = first_member; i < fb->scratch->count && !member; i++) {
            struct ckpt_case *c = &fb->scratch->items[i];
            if (strlen(c->name) == item.n && strncmp(c->name, item.p, item.n) == 0)
                member = c;
        }
        if (!member)
            return error_set(ST_INPUT, "%s:%d: '%s' names '%.*s', which %s does not produce",
                             fb->path, e->line, e->key, (int)item.n, item.p, s->title);
        int rc = add_label(member, label, fb->path, e->line);
        if (rc != ST_OK)
            return rc;
    }
    return ST_OK;
}

static int build_sweep(struct file_build *fb, const struct ini_section *s)
{
    struct sweep_plan *plan = calloc(1, sizeof *plan);
    if (!plan)
        return error_set(ST_INTERNAL, "%s:%d: out of memory", fb->path, s->line);
    plan->base = fb->defaults;
    int first_member = fb->scratch->count;
    int rc = plan_entries(plan, fb, s);
    if (rc == ST_OK)
        rc = check_plan(plan, fb, s);
    if (rc == ST_OK)
        rc = expand_sweep(plan, fb, s);
    for (int i = 0; rc == ST_OK && i < plan->n_label_entries; i++)
        rc = apply_label_entry(plan->label_entries[i], fb, s, first_member);
    sweep_plan_free(plan);
    return rc;
}

/* Sweep names are not case names, but two sweeps of one name in a file are
 * surely a copy-paste slip. */
static int check_sweep_names(const struct ini_doc *doc, const char *path)
{
    for (int i = 0; i < doc->n_sections; i++)
        for (int j = 0; j < i; j++)
            if (doc->sections[i].kind == SECTION_SWEEP && doc->sections[j].kind == SECTION_SWEEP &&
                strcmp(doc->sections[i].name, doc->sections[j].name) == 0)
                return error_set(ST_INPUT, "%s:%d: duplicate sweep name '%s' (first at line %d)",
                                 path, doc->sections[i].line, doc->sections[i].name,
                                 doc->sections[j].line);
    return ST_OK;
}

static int build_doc(const struct ini_doc *doc, struct file_build *fb)
{
    int rc = check_sweep_names(doc, fb->path);
    for (int i = 0; rc == ST_OK && i < doc->n_sections; i++) {
        const struct ini_section *s = &doc->sections[i];
        switch (s->kind) {
        case SECTION_DEFAULTS: rc = build_defaults(fb, s); break;
        case SECTION_CASE: rc = build_case(fb, s); break;
        case SECTION_SWEEP: rc = build_sweep(fb, s); break;
        }
    }
    return rc;
}

/* ------------------------------------------------------------------ */
/* Loading                                                              */

/* Adds one file's cases to `scratch`, names unique across both lists. */
static int load_file_into(struct case_list *scratch, const struct case_list *loaded,
                          const char *path)
{
    struct ini_doc doc = {0};
    int rc = read_doc(path, &doc);
    if (rc == ST_OK) {
        struct file_build fb = {.path = path, .scratch = scratch, .loaded = loaded};
        builder_defaults(&fb.defaults);
        rc = build_doc(&doc, &fb);
    }
    ini_doc_free(&doc);
    return rc;
}

int case_list_load_file(struct case_list *list, const char *path)
{
    struct case_list scratch = {0};
    int rc = load_file_into(&scratch, list, path);
    if (rc == ST_OK)
        rc = append_all(list, &scratch);
    case_list_free(&scratch);
    return rc;
}

static int has_ini_suffix(const char *name)
{
    size_t n = strlen(name);
    return name[0] != '.' && n > 4 && strcmp(name + n - 4, ".ini") == 0;
}

static int compare_strings(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

struct name_list {
    int count, capacity;
    char **names;
};

static void name_list_free(struct name_list *names)
{
    for (int i = 0; i < names->count; i++)
        free(names->names[i]);
    free(names->names);
}

/* The *.ini names in dir, sorted, so the load order (and with it which of
 * two duplicates is "first") does not depend on the file system. */
static char *join_path(const char *dir, const char *name);

/* The *.ini files of dir and of its subdirectories one level down (named
 * "sub/x.ini": cases/bench/ holds the benchmark's cases), hidden entries
 * left out. */
static int list_ini_files(const char *dir, struct name_list *out)
{
    DIR *d = opendir(dir);
    if (!d)
        return error_set(ST_INPUT, "%s: cannot open case directory: %s", dir, strerror(errno));
    int rc = ST_OK;
    for (struct dirent *ent; rc == ST_OK && (ent = readdir(d));) {
        if (ent->d_name[0] == '.')
            continue;
        char *sub = has_ini_suffix(ent->d_name) ? NULL : join_path(dir, ent->d_name);
        struct stat st_sub;
        DIR *inner = sub && stat(sub, &st_sub) == 0 && S_ISDIR(st_sub.st_mode) ? opendir(sub) : NULL;
        for (struct dirent *e2; rc == ST_OK && inner && (e2 = readdir(inner));) {
            char *copy = NULL;
            if (e2->d_name[0] == '.' || !has_ini_suffix(e2->d_name))
                continue;
            if (grow((void **)&out->names, &out->capacity, out->count, sizeof *out->names) ||
                !(copy = join_path(ent->d_name, e2->d_name)))
                rc = error_set(ST_INTERNAL, "%s: out of memory", dir);
            else
                out->names[out->count++] = copy;
        }
        if (inner)
            closedir(inner);
        free(sub);
        if (!has_ini_suffix(ent->d_name))
            continue;
        char *copy = NULL;
        if (grow((void **)&out->names, &out->capacity, out->count, sizeof *out->names) ||
            !(copy = strdup(ent->d_name)))
            rc = error_set(ST_INTERNAL, "%s: out of memory", dir);
        else
            out->names[out->count++] = copy;
    }
    closedir(d);
    if (rc == ST_OK && out->count == 0)
        rc = error_set(ST_INPUT, "%s: no *.ini case files in directory", dir);
    if (rc == ST_OK)
        qsort(out->names, (size_t)out->count, sizeof *out->names, compare_strings);
    return rc;
}

static char *join_path(const char *dir, const char *name)
{
    size_t n = strlen(dir);
    int slash = n > 0 && dir[n - 1] != '/';
    char *path = malloc(n + (size_t)slash + strlen(name) + 1);
    if (path)
        sprintf(path, "%s%s%s", dir, slash ? "/" : "", name);
    return path;
}

int case_list_load_dir(struct case_list *list, const char *dir)
{
    struct name_list files = {0};
    struct case_list scratch = {0};
    int rc = list_ini_files(dir, &files);
    for (int i = 0; rc == ST_OK && i < files.count; i++) {
        char *path = join_path(dir, files.names[i]);
        rc = path ? load_file_into(&scratch, list, path)
                  : error_set(ST_INTERNAL, "%s: out of memory", dir);
        free(path);
    }
    if (rc == ST_OK)
        rc = append_all(list, &scratch);
    case_list_free(&scratch);
    name_list_free(&files);
    return rc;
}

int case_list_load(struct case_list *list, const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return error_set(ST_INPUT, "%s: %s", path, strerror(errno));
    return S_ISDIR(st.st_mode) ? case_list_load_dir(list, path) : case_list_load_file(list, path);
}

/* ------------------------------------------------------------------ */
/* Queries                                                              */

struct suggestion {
    int distance, index;
};

static int compare_suggestions(const void *a, const void *b)
{
    const struct suggestion *x = a, *y = b;
    if (x->distance != y->distance)
        return x->distance < y->distance ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* A name qualifies when it is a near miss or contains what was typed
 * ("bs1" finds every *_bs1); closest first, then in list order. */
int case_list_suggest(const struct case_list *list, const char *name, const char **out, int n)
{
    if (n <= 0 || list->count == 0)
        return 0;
    struct suggestion *found = malloc((size_t)list->count * sizeof *found);
    if (!found)
        return 0;
    int count = 0;
    for (int i = 0; i < list->count; i++) {
        int d = edit_distance(name, list->items[i].name);
        if (is_near_miss(name, d) || (*name && strstr(list->items[i].name, name)))
            found[count++] = (struct suggestion){d, i};
    }
    qsort(found, (size_t)count, sizeof *found, compare_suggestions);
    if (count > n)
        count = n;
    for (int i = 0; i < count; i++)
        out[i] = list->items[found[i].index].name;
    free(found);
    return count;
}

/* The impls the harness ships as correct (is_reference in impls/registry.c,
 * which this torch-free module does not link; test_impls checks the two
 * agree); anything else is a planted bug (impls/faulty/) that is expected
 * to be caught. */
static int is_reference_impl(const char *impl)
{
    static const char *const references[] = {"none", "reentrant", "nonreentrant", "selective", NULL};
    return name_index(references, impl) >= 0;
}

unsigned case_expected_mask(const struct ckpt_case *c, const char *impl)
{
    for (int i = 0; i < c->n_expect; i++)
        if (strcmp(c->expect[i].impl, impl) == 0)
            return c->expect[i].verdict_mask;
    if (is_reference_impl(impl))
        return (1u << V_PASS) | (1u << V_NOISE);
    return (1u << V_FAIL) | (1u << V_MEMFAIL);
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

int case_has_label(const struct ckpt_case *c, const char *label)
{
    for (int i = 0; i < c->n_labels; i++)
        if (strcmp(c->labels[i], label) == 0)
            return 1;
    return 0;
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
