/* case_ini: phase 1 of loading a case file, so that every message can
 * name a line (phase 2, building cases, is case_load.c):
 *   read:     inih splits lines into comments, section headers and
 *             key = value pairs. It is fed by our own line reader, which
 *             counts lines and records section headers itself, because the
 *             installed inih has no line-number handler, cuts section names
 *             at 49 characters and says nothing about a section with no keys.
 *             The result is a list of sections, each with its (key, value,
 *             line) entries.
 */
#define _POSIX_C_SOURCE 200809L

#include "case_ini.h"

#include "case_text.h"
#include "error.h"

#include <ini.h>

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum {
    MAX_FILE_BYTES = 16 << 20,
    SHOWN_LINE_MAX = 80,    /* how much of a bad line a syntax error quotes */
};

void case_ini_free(struct ini_doc *doc)
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
    struct span after = text_trim(end + 1, strlen(end + 1));
    if (after.n && after.p[0] != ';' && after.p[0] != '#')
        return error_set(ST_INPUT, "%s:%d: unexpected text '%.*s' after section header", r->path,
                         r->lineno, (int)after.n, after.p);

    struct span title = text_trim(line + 1, (size_t)(end - line - 1));
    char header[CASE_NAME_MAX + 16];
    if (text_span_copy(title, header, sizeof header))
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
    if (!text_is_case_name(name))
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
    struct span line = text_trim(start, len);
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
    struct span s = text_trim(text + pos, newline ? (size_t)(newline - text) - pos : size - pos);
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

int case_ini_read(const char *path, struct ini_doc *doc)
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

static int has_ini_suffix(const char *name)
{
    size_t n = strlen(name);
    return name[0] != '.' && n > 4 && strcmp(name + n - 4, ".ini") == 0;
}

static int compare_strings(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void case_ini_names_free(struct name_list *names)
{
    for (int i = 0; i < names->count; i++)
        free(names->names[i]);
    free(names->names);
}

/* The *.ini files of dir and of its subdirectories one level down (named
 * "sub/x.ini": cases/bench/ holds the benchmark's cases), hidden entries
 * left out; sorted, so the load order (and with it which of two duplicates
 * is "first") does not depend on the file system. */
int case_ini_list_dir(const char *dir, struct name_list *out)
{
    DIR *d = opendir(dir);
    if (!d)
        return error_set(ST_INPUT, "%s: cannot open case directory: %s", dir, strerror(errno));
    int rc = ST_OK;
    for (struct dirent *ent; rc == ST_OK && (ent = readdir(d));) {
        if (ent->d_name[0] == '.')
            continue;
        char *sub = has_ini_suffix(ent->d_name) ? NULL : case_ini_join_path(dir, ent->d_name);
        struct stat st_sub;
        DIR *inner = sub && stat(sub, &st_sub) == 0 && S_ISDIR(st_sub.st_mode) ? opendir(sub) : NULL;
        for (struct dirent *e2; rc == ST_OK && inner && (e2 = readdir(inner));) {
            char *copy = NULL;
            if (e2->d_name[0] == '.' || !has_ini_suffix(e2->d_name))
                continue;
            if (grow((void **)&out->names, &out->capacity, out->count, sizeof *out->names) ||
                !(copy = case_ini_join_path(ent->d_name, e2->d_name)))
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

char *case_ini_join_path(const char *dir, const char *name)
{
    size_t n = strlen(dir);
    int slash = n > 0 && dir[n - 1] != '/';
    char *path = malloc(n + (size_t)slash + strlen(name) + 1);
    if (path)
        sprintf(path, "%s%s%s", dir, slash ? "/" : "", name);
    return path;
}
