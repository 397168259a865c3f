/* case_sweep: a [sweep:NAME] section becomes the cartesian product of its
 * axis.KEY lists, each case named by the section's `name` pattern; label.X
 * lists add labels to some of its members. */
#define _POSIX_C_SOURCE 200809L

#include "case_build.h"

#include "case_text.h"
#include "error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    MAX_AXIS_VALUES = 256,
    MAX_SWEEP_CASES = 10000, /* a typo in an axis should not allocate gigabytes */
    /* CASE_MAX_TOTAL (all files together) is checked before a sweep
     * expands, so many large sweeps fail at once instead of after minutes
     * of loading. */
    MAX_TOTAL_CASES = CASE_MAX_TOTAL,
};

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
    const char *cursor = text_list_start(axis->text);
    if (!cursor)
        return error_set(ST_INPUT, "%s:%d: '%s' in %s is empty: a sweep must expand to at "
                         "least one case", fb->path, e->line, e->key, s->title);
    struct span item;
    while (text_next_item(&cursor, ',', &item)) {
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
    const struct key_spec *spec = case_key_find(key);
    if (!spec)
        return case_key_unknown(fb->path, e->line, s->title, "axis.", key);
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
            if (!text_is_label_name(e->key + 6))
                return error_set(ST_INPUT, "%s:%d: bad label '%s' in key '%s': use letters, "
                                 "digits, '_' and '-'", fb->path, e->line, e->key + 6, e->key);
            if (plan->n_label_entries == MAX_AXIS_VALUES)
                return error_set(ST_INPUT, "%s:%d: too many label.* keys", fb->path, e->line);
            plan->label_entries[plan->n_label_entries++] = e;
        } else {
            rc = case_build_apply_entry(&plan->base, fb, s, e);
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
        text_buf_append(buf, n, a ? ", " : "");
        text_buf_append(buf, n, plan->axes[a].spec->name);
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
    if (!text_is_case_name(name))
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
        int rc = case_key_apply(&b, &at, axis->values[choice[a]]);
        if (rc != ST_OK)
            return rc;
    }
    char name[CASE_NAME_MAX];
    int rc = render_name(plan, choice, fb, name, sizeof name);
    return rc != ST_OK ? rc : case_build_finish(&b, fb, s, name);
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
    const char *cursor = text_list_start(e->value);
    struct span item;
    while (text_next_item(&cursor, ',', &item)) {
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

int case_build_sweep(struct file_build *fb, const struct ini_section *s)
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
