/* case_build: what building cases from a file's sections (phase 2 of
 * loading) shares between case_load.c ([defaults] and [case:NAME]) and
 * case_sweep.c ([sweep:NAME]); case_build.c builds one case, and neither
 * of the two calls the other except case_load.c -> case_build_sweep.
 * Internal to the case loader. */
#ifndef CKPT_CASE_BUILD_H
#define CKPT_CASE_BUILD_H

#include "case_ini.h"
#include "case_keys.h"

/* All files together hold at most this many cases, [case:NAME] sections
 * and sweeps' members alike: a generated file should not load for minutes. */
#define CASE_MAX_TOTAL 20000

/* What building one file needs: its running defaults and both lists that
 * names must be unique in. */
struct file_build {
    const char *path;
    struct case_builder defaults;
    struct case_list *scratch;
    const struct case_list *loaded;
};

/* Room for `extra` more cases in list (ST_INTERNAL when it cannot grow). */
int case_list_reserve(struct case_list *list, int extra);
/* Applies one plain `key = value` entry of a section (case_build.c). */
int case_build_apply_entry(struct case_builder *b, const struct file_build *fb, const struct ini_section *s,
                           const struct ini_entry *e);
/* Names and places the case, resolves what depends on other keys, checks
 * the keys against each other and adds it to the file's cases. */
int case_build_finish(struct case_builder *b, const struct file_build *fb, const struct ini_section *s,
                      const char *name);
/* Expands a [sweep:NAME] section into its cases (case_sweep.c). */
int case_build_sweep(struct file_build *fb, const struct ini_section *s);

#endif
