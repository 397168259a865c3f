/* case_build: one case built from a file's section (case_build.h): its
 * entries applied, its keys checked against each other, its name made
 * unique; what case_load.c and case_sweep.c both build with. */
#include "case_build.h"

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "case_check.h"
#include "error.h"

int case_list_reserve(struct case_list *list, int extra)
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
    if ((long)loaded->count + scratch->count >= CASE_MAX_TOTAL)
        return error_set(ST_INPUT, "%s:%d: case '%s' is one more than the %d loaded cases allowed in all",
                         c->file, c->line, c->name, CASE_MAX_TOTAL);
    int rc = case_list_reserve(scratch, 1);
    if (rc != ST_OK)
        return rc;
    scratch->items[scratch->count++] = *c;
    return ST_OK;
}

static int is_sweep_only_key(const char *key)
{
    return strcmp(key, "name") == 0 || strncmp(key, "axis.", 5) == 0 ||
           strncmp(key, "label.", 6) == 0;
}

int case_build_apply_entry(struct case_builder *b, const struct file_build *fb, const struct ini_section *s,
                           const struct ini_entry *e)
{
    if (is_sweep_only_key(e->key) && s->kind != SECTION_SWEEP)
        return error_set(ST_INPUT, "%s:%d: key '%s' is only allowed in [sweep:NAME] sections "
                         "(a case is named by its section)", fb->path, e->line, e->key);
    const struct key_spec *spec = case_key_find(e->key);
    if (!spec)
        return case_key_unknown(fb->path, e->line, s->title, "", e->key);
    struct where at = {fb->path, e->line, s->title, e->key, spec};
    return case_key_apply(b, &at, e->value);
}

int case_build_finish(struct case_builder *b, const struct file_build *fb, const struct ini_section *s,
                      const char *name)
{
    struct ckpt_case *c = &b->c;
    snprintf(c->name, sizeof c->name, "%s", name);
    snprintf(c->file, sizeof c->file, "%s", fb->path);
    c->line = s->line;
    if (b->segments_sqrt) {
        long rounded = lround(sqrt((double)c->layers));
        c->segments = rounded < 1 ? 1 : (int)rounded;
    }
    int rc = case_check_keys(b, fb->path, s->line);
    return rc != ST_OK ? rc : add_unique(fb->scratch, fb->loaded, c);
}
