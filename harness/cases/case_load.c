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

static int append_all(struct case_list *list, const struct case_list *more)
{
    int rc = case_list_reserve(list, more->count);
    if (rc != ST_OK)
        return rc;
    if (more->count)
        memcpy(list->items + list->count, more->items, (size_t)more->count * sizeof *more->items);
    list->count += more->count;
    return ST_OK;
}

/* ------------------------------------------------------------------ */
/* Phase 2: build cases from sections (case_build.c builds one)         */


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
