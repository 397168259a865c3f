/* case_ini: reads case files as INI, phase 1 of loading (case_load.c):
 * one file into sections of (key, value, line) entries, every error naming
 * file:line; and which *.ini files a case directory holds, in name order.
 * Knows section kinds and names, not keys. Internal to the case loader. */
#ifndef CKPT_CASE_INI_H
#define CKPT_CASE_INI_H

#include "case.h"

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

/* Reads the file at path into doc (empty on entry); free it either way. */
int case_ini_read(const char *path, struct ini_doc *doc);
void case_ini_free(struct ini_doc *doc);

struct name_list {
    int count, capacity;
    char **names;
};

/* The *.ini files of dir and of its subdirectories one level down
 * ("sub/x.ini"), sorted; ST_INPUT when there are none. Free the list
 * either way. */
int case_ini_list_dir(const char *dir, struct name_list *out);
void case_ini_names_free(struct name_list *names);
/* "dir/name" (one slash between), malloc'd; NULL when out of memory. */
char *case_ini_join_path(const char *dir, const char *name);

#endif
