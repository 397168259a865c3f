#include "summary_file.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "case.h"
#include "error.h"
#include "temp_file.h"

/* Fields that count or measure (ULPs, bytes, milliseconds, runs) are never
 * negative; a summary that says so was not written by a harness, and
 * believing it would report false regressions. */
static int is_nonnegative_field(const char *key)
{
    /* max_ulp and noise_floor_ulp: the raw distances' names in older summaries */
    static const char *const keys[] = {"max_scaled_ulp", "raw_max_ulp", "max_ulp", "raw_noise_floor_ulp",
                                       "noise_floor_ulp", "noise_floor_scaled_ulp",
                                       "noise_ratio", "overhead", "ideal_overhead", "recomputes", "case_index",
                                       "baseline_runs", "timed_steps", "case_seconds", "bitwise_tensors_differ", NULL};
    size_t n = strlen(key);
    for (int i = 0; keys[i]; i++)
        if (strcmp(key, keys[i]) == 0)
            return 1;
    return (n > 6 && strcmp(key + n - 6, "_bytes") == 0) || (n > 3 && strcmp(key + n - 3, "_ms") == 0);
}

/* Why a record's numbers cannot be believed, or NULL; the text goes to why. */
static const char *check_numbers(const json_t *rec, char *why, size_t len)
{
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)rec, key, v) {
        int measured = is_nonnegative_field(key);
        if (!measured && strcmp(key, "memory_saved") != 0 && strcmp(key, "end_forward_saved") != 0 &&
            strcmp(key, "peak_cut") != 0 && strcmp(key, "held_cut") != 0)
            continue;
        if (json_is_null(v))
            continue; /* not measured (a distance: infinite) */
        if (!json_is_number(v)) {
            snprintf(why, len, "\"%s\" is not a number", key);
            return why;
        }
        double x = json_number_value(v);
        if (isnan(x) || (measured && x < 0)) {
            snprintf(why, len, "\"%s\" is %g: expected a number >= 0", key, x);
            return why;
        }
    }
    return NULL;
}

/* Why root is not a summary, or NULL; *bad is the offending record. */
static const char *check_summary(const json_t *root, size_t *bad, char *why, size_t why_len)
{
    const json_t *records = json_object_get(root, "records");
    if (!json_is_object(root))
        return "the top level is not an object";
    if (!json_is_array(records))
        return "no \"records\" array";
    for (size_t i = 0; i < json_array_size(records); i++) {
        const json_t *rec = json_array_get(records, i);
        *bad = i;
        if (!json_is_object(rec) || !json_is_string(json_object_get(rec, "case")) ||
            !json_is_string(json_object_get(rec, "impl")))
            return "a record without a case and an impl";
        if (summary_verdict(rec) < 0)
            return "a record without a known verdict";
        const char *bad_number = check_numbers(rec, why, why_len);
        if (bad_number)
            return bad_number;
    }
    return NULL;
}

int summary_file_load(const char *path, json_t **out)
{
    char file[1100];
    struct stat sb;
    if (stat(path, &sb) != 0)
        return error_set(ST_INPUT, "%s: no such run directory or summary file", path);
    if (S_ISDIR(sb.st_mode))
        snprintf(file, sizeof file, "%s/summary.json", path);
    else
        snprintf(file, sizeof file, "%s", path);
    if (stat(file, &sb) != 0)
        return error_set(ST_INPUT, "%s: cannot read the summary: %s", file, strerror(errno));
    if (!S_ISREG(sb.st_mode)) /* a FIFO would block the read for ever */
        return error_set(ST_INPUT, "%s: not a regular file, not a summary", file);
    json_error_t jerr;
    json_t *root = json_load_file(file, 0, &jerr);
    if (!root)
        return error_set(ST_INPUT, "%s:%d: not a ckpt-verify summary: %s", file, jerr.line, jerr.text);
    size_t bad = 0;
    char reason[160];
    const char *why = check_summary(root, &bad, reason, sizeof reason);
    if (why) {
        int in_record = json_is_array(json_object_get(root, "records")) && json_is_object(root);
        json_decref(root);
        if (in_record)
            return error_set(ST_INPUT, "%s: not a ckpt-verify summary: record %zu: %s", file, bad, why);
        return error_set(ST_INPUT, "%s: not a ckpt-verify summary: %s", file, why);
    }
    *out = root;
    return ST_OK;
}

int files_write_atomic(const char *dir, int n, const char *const *names, const char *const *data, const size_t *lens)
{
    char path[FILES_ATOMIC_MAX][1100], *tmp[FILES_ATOMIC_MAX] = {0};
    int st = n > FILES_ATOMIC_MAX ? error_set(ST_INTERNAL, "%s: more than %d files at once", dir, FILES_ATOMIC_MAX)
                                  : ST_OK;
    int staged = 0;
    /* A name taken by a directory would fail its rename after the others
     * were renamed: refused before anything is written. */
    for (int i = 0; !st && i < n; i++) {
        struct stat sb;
        snprintf(path[i], sizeof path[i], "%s/%s", dir, names[i]);
        if (lstat(path[i], &sb) == 0 && S_ISDIR(sb.st_mode))
            st = error_set(ST_INPUT, "%s: is a directory: cannot write it (nothing written)", path[i]);
    }
    /* Every file goes to its temporary first: a disk that cannot hold one
     * replaces none, so the set on disk is the old one or the new one. */
    for (; !st && staged < n; staged++) {
        int fd;
        if (!(st = temp_file_create(path[staged], &tmp[staged], &fd)) &&
            (st = temp_file_finish(fd, tmp[staged], data[staged], lens[staged]))) {
            free(tmp[staged]);
            tmp[staged] = NULL; /* removed by temp_file_finish */
        }
    }
    for (int i = 0; i < staged; i++) {
        if (tmp[i] && st)
            unlink(tmp[i]);
        else if (tmp[i])
            st = temp_file_publish(tmp[i], path[i]);
        free(tmp[i]);
    }
    return st;
}

int file_write_atomic(const char *dir, const char *name, const char *data, size_t len)
{
    return files_write_atomic(dir, 1, &name, &data, &len);
}

char *summary_file_text(const json_t *root, size_t *len)
{
    char *text = json_dumps(root, JSON_INDENT(2) | JSON_SORT_KEYS);
    if (!text)
        return NULL;
    *len = strlen(text);
    /* A text file ends with a newline, as json_dump_file's output did. */
    char *with_nl = realloc(text, *len + 2);
    if (!with_nl) {
        free(text);
        return NULL;
    }
    with_nl[(*len)++] = '\n';
    with_nl[*len] = '\0';
    return with_nl;
}

int summary_file_write(const json_t *root, const char *dir, const char *name)
{
    size_t len;
    char *text = summary_file_text(root, &len);
    if (!text)
        return error_set(ST_INTERNAL, "%s/%s: cannot serialise the summary (out of memory)", dir, name);
    int st = file_write_atomic(dir, name, text, len);
    free(text);
    return st;
}

const char *summary_str(const json_t *obj, const char *key)
{
    const char *s = json_string_value(json_object_get(obj, key));
    return s ? s : "";
}

double summary_num(const json_t *obj, const char *key)
{
    const json_t *v = json_object_get(obj, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

int summary_bool(const json_t *obj, const char *key) { return json_is_true(json_object_get(obj, key)); }

int summary_verdict(const json_t *rec)
{
    const char *v = json_string_value(json_object_get(rec, "verdict"));
    return v ? verdict_from_name(v) : -1;
}
