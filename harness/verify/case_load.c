/* case_load: loads INI case files (cases/NAME.ini) into resolved case definitions.
 *
 * A file is handled in two phases, so that every message can name a line:
 *   1. read:  case_ini.c: inih splits lines into comments, section headers
 *             and key = value pairs; the result is a list of sections, each
 *             with its (key, value, line) entries.
 *   2. build: [defaults] sections update the file's running defaults; a
 *             [case:NAME] becomes one case; a [sweep:NAME] becomes the
 *             cartesian product of its axis.KEY lists, named by its `name`
 *             pattern.
 * A file or directory is loaded into a scratch list that is merged into the
 * caller's list only when all of it is valid: a failed load changes nothing.
 *
 * The key table (case_keys.c) is the one place that says how each key is
 * parsed, what it allows (for messages) and how it prints (for attributes);
 * cases/README.md documents the same keys for people.
 */
#define _POSIX_C_SOURCE 200809L

#include "case_build.h"

#include "case_check.h"
#include "case_ini.h"
#include "error.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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

static int build_defaults(struct file_build *fb, const struct ini_section *s)
{
    for (int e = 0; e < s->n_entries; e++) {
        int rc = case_build_apply_entry(&fb->defaults, fb, s, &s->entries[e]);
        if (rc != ST_OK)
            return rc;
    }
    return ST_OK;
}

static int build_case(struct file_build *fb, const struct ini_section *s)
{
    struct case_builder b = fb->defaults;
    for (int e = 0; e < s->n_entries; e++) {
        int rc = case_build_apply_entry(&b, fb, s, &s->entries[e]);
        if (rc != ST_OK)
            return rc;
    }
    return case_build_finish(&b, fb, s, s->name);
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
        case SECTION_SWEEP: rc = case_build_sweep(fb, s); break;
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
    int rc = case_ini_read(path, &doc);
    if (rc == ST_OK) {
        struct file_build fb = {.path = path, .scratch = scratch, .loaded = loaded};
        case_builder_defaults(&fb.defaults);
        rc = build_doc(&doc, &fb);
    }
    case_ini_free(&doc);
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

int case_list_load_dir(struct case_list *list, const char *dir)
{
    struct name_list files = {0};
    struct case_list scratch = {0};
    int rc = case_ini_list_dir(dir, &files);
    for (int i = 0; rc == ST_OK && i < files.count; i++) {
        char *path = case_ini_join_path(dir, files.names[i]);
        rc = path ? load_file_into(&scratch, list, path)
                  : error_set(ST_INTERNAL, "%s: out of memory", dir);
        free(path);
    }
    if (rc == ST_OK)
        rc = append_all(list, &scratch);
    case_list_free(&scratch);
    case_ini_names_free(&files);
    return rc;
}

int case_list_load(struct case_list *list, const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return error_set(ST_INPUT, "%s: %s", path, strerror(errno));
    return S_ISDIR(st.st_mode) ? case_list_load_dir(list, path) : case_list_load_file(list, path);
}
