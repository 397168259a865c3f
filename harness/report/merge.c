#include "merge.h"

#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "error.h"
#include "junit.h"
#include "merge_reports.h"
#include "summary_file.h"

struct slot {
    json_t *rec;    /* borrowed from the merged array */
    long long index; /* case_index, or LLONG_MAX when the record has none */
    size_t order;   /* input order, to keep the sort stable */
};

static int by_index(const void *a, const void *b)
{
    const struct slot *x = a, *y = b;
    if (x->index != y->index)
        return x->index < y->index ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* The shards of one N that are not among the inputs, as "2/3, 3/3" in
 * `list`; returns how many. Unsharded or mixed inputs have none missing:
 * there is nothing to check them against. */
static int missing_shards(json_t *const *roots, int n, char *list, size_t len)
{
    list[0] = '\0';
    int total = 0;
    for (int i = 0; i < n; i++) {
        int k, of;
        if (sscanf(summary_str(roots[i], "shard"), "%d/%d", &k, &of) != 2 || (total && of != total) || of < 1)
            return 0;
        total = of;
    }
    if (total <= 1)
        return 0;
    char *seen = calloc((size_t)total + 1, 1);
    if (!seen)
        return 0;
    for (int i = 0; i < n; i++) {
        int k, of;
        if (sscanf(summary_str(roots[i], "shard"), "%d/%d", &k, &of) == 2 && k >= 1 && k <= total)
            seen[k] = 1;
    }
    int missing = 0;
    for (int k = 1; k <= total; k++) {
        if (seen[k])
            continue;
        size_t used = strlen(list);
        if (used < len)
            snprintf(list + used, len - used, "%s%d/%d", missing ? ", " : "", k, total);
        missing++;
    }
    free(seen);
    return missing;
}

/* A directory name as a JSON string: as it is when it is UTF-8, otherwise
 * with each byte >= 0x80 written as \xNN, so no input is dropped from
 * merged_from for its name. */
static json_t *dir_name_json(const char *dir)
{
    json_t *s = json_string(dir);
    if (s)
        return s;
    size_t n = strlen(dir);
    char *text = malloc(4 * n + 1), *p = text;
    if (!text)
        return NULL;
    for (const unsigned char *c = (const unsigned char *)dir; *c; c++)
        p += *c < 0x80 ? sprintf(p, "%c", *c) : sprintf(p, "\\x%02x", *c);
    s = json_string(text);
    free(text);
    return s;
}

static json_t *merged_root(json_t *const *roots, const char *const *dirs, int n, FILE *out)
{
    char when[32];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    json_t *root = json_pack("{s:i, s:s, s:s, s:s, s:s, s:[]}", "schema_version", 1, "harness_version",
                             summary_str(roots[0], "harness_version"), "git_rev", summary_str(roots[0], "git_rev"),
                             "libtorch_version", summary_str(roots[0], "libtorch_version"), "created_utc", when,
                             "merged_from");
    if (!root)
        return NULL;
    const char *suite = summary_str(roots[0], "suite");
    int same_suite = 1;
    for (int i = 0; i < n; i++) {
        json_t *from = json_pack("{s:o, s:s, s:s}", "dir", dir_name_json(dirs[i]), "git_rev",
                                 summary_str(roots[i], "git_rev"), "shard", summary_str(roots[i], "shard"));
        if (!from || json_array_append_new(json_object_get(root, "merged_from"), from)) {
            json_decref(root);
            return NULL;
        }
        same_suite &= strcmp(summary_str(roots[i], "suite"), suite) == 0;
        if (strcmp(summary_str(roots[i], "git_rev"), summary_str(roots[0], "git_rev")) != 0 ||
            strcmp(summary_str(roots[i], "harness_version"), summary_str(roots[0], "harness_version")) != 0)
            fprintf(out, "merge: warning: %s comes from git %s, %s from git %s (each record keeps its own)\n", dirs[i],
                    summary_str(roots[i], "git_rev"), dirs[0], summary_str(roots[0], "git_rev"));
    }
    if (same_suite && suite[0])
        json_object_set_new(root, "suite", json_string(suite));
    return root;
}

/* Concatenates the inputs' records in the selected order; ST_INPUT on a
 * case × impl held twice. */
static int merge_records(json_t *const *roots, const char *const *dirs, int n, json_t *records)
{
    json_t *owner = json_object(); /* "case/impl" -> index of the input that holds it */
    json_t *all = json_array();
    int st = owner && all ? ST_OK : error_set(ST_INTERNAL, "merge: out of memory");
    for (int i = 0; i < n && !st; i++) {
        const json_t *recs = json_object_get(roots[i], "records");
        for (size_t r = 0; r < json_array_size(recs) && !st; r++) {
            json_t *rec = json_array_get(recs, r);
            char key[256];
            snprintf(key, sizeof key, "%s/%s", summary_str(rec, "case"), summary_str(rec, "impl"));
            const json_t *first = json_object_get(owner, key);
            if (first)
                st = error_set(ST_INPUT, "merge: %s is in both %s and %s (the same shard twice?)", key,
                               dirs[json_integer_value(first)], dirs[i]);
            else {
                json_object_set_new(owner, key, json_integer(i));
                json_array_append(all, rec);
            }
        }
    }
    size_t count = json_array_size(all);
    struct slot *slots = st ? NULL : calloc(count ? count : 1, sizeof *slots);
    if (!st && !slots)
        st = error_set(ST_INTERNAL, "merge: out of memory");
    for (size_t i = 0; !st && i < count; i++) {
        json_t *rec = json_array_get(all, i);
        const json_t *idx = json_object_get(rec, "case_index");
        slots[i] = (struct slot){rec, json_is_integer(idx) ? (long long)json_integer_value(idx) : LLONG_MAX, i};
    }
    if (!st) {
        qsort(slots, count, sizeof *slots, by_index);
        for (size_t i = 0; i < count; i++)
            json_array_append(records, slots[i].rec);
    }
    free(slots);
    json_decref(all);
    json_decref(owner);
    return st;
}

int merge_run_dirs(const char *out_dir, const char *const *dirs, int n_dirs, int strict, FILE *out, int *unexpected)
{
    json_t **roots = calloc((size_t)n_dirs, sizeof *roots);
    json_t *root = NULL;
    int st = roots ? ST_OK : error_set(ST_INTERNAL, "merge: out of memory");
    for (int i = 0; i < n_dirs && !st; i++)
        st = summary_file_load(dirs[i], &roots[i]);
    if (!st && !(root = merged_root(roots, dirs, n_dirs, out)))
        st = error_set(ST_INTERNAL, "merge: out of memory");
    json_t *records = json_array();
    if (!st && (!records || json_object_set(root, "records", records)))
        st = error_set(ST_INTERNAL, "merge: out of memory");
    if (!st)
        st = merge_records(roots, dirs, n_dirs, records);
    /* A merged report that silently lacks a shard looks complete: a
     * warning, or with strict (a CI matrix's merge) an error before
     * anything is written. */
    char missing[512];
    int n_missing = st ? 0 : missing_shards(roots, n_dirs, missing, sizeof missing);
    if (n_missing && strict)
        st = error_set(ST_INPUT, "merge --strict: shard%s %s %s not among the inputs; nothing written",
                       n_missing > 1 ? "s" : "", missing, n_missing > 1 ? "are" : "is");
    else if (n_missing)
        fprintf(out, "merge: warning: shard%s %s %s not among the inputs\n", n_missing > 1 ? "s" : "", missing,
                n_missing > 1 ? "are" : "is");
    /* The merged directory holds its reports, named relative to it. */
    if (!st)
        st = merge_adopt_reports(out_dir, roots, dirs, n_dirs, out);
    struct junit_counts counts = {0};
    if (!st)
        st = junit_write_with_summary(root, out_dir, &counts);
    if (!st) {
        *unexpected = counts.failures + counts.errors;
        fprintf(out, "merged %d run(s): %d record(s), %d failure(s), %d error(s), %d skipped -> %s/summary.json, %s/junit.xml\n",
                n_dirs, counts.tests, counts.failures, counts.errors, counts.skipped, out_dir, out_dir);
    }
    json_decref(records);
    json_decref(root);
    for (int i = 0; roots && i < n_dirs; i++)
        json_decref(roots[i]);
    free(roots);
    return st;
}
