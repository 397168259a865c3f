#include "report.h"

#include <jansson.h>
#include <stdlib.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "aten/aten.h"
#include "compare.h"
#include "error.h"

static const char *percent_cell(double v, char *buf, size_t len)
{
    if (isnan(v))
        snprintf(buf, len, "-");
    else
        snprintf(buf, len, "%.1f%%", 100.0 * v);
    return buf;
}

void report_print_case(FILE *out, const struct case_result *r)
{
    char ulp[32], saved[32], over[32];
    fprintf(out, "case %s  (baselines: %d, noise floor: %s ULP)  -> %s\n", r->name, r->baseline_runs,
            ulp_format(r->noise_floor_ulp, ulp, sizeof ulp), r->status ? "not written" : r->h5_path);
    if (r->status && r->n_results == 0) {
        fprintf(out, "  ERROR  %s\n", r->error);
        return;
    }
    fprintf(out, "  %-22s %-8s %-3s %8s  %9s  %8s  %s\n", "impl", "verdict", "ok", "max ULP", "mem saved", "overhead",
            "first divergence");
    for (int i = 0; i < r->n_results; i++) {
        const struct impl_result *x = &r->results[i];
        if (isnan(x->overhead) || isinf(x->overhead))
            snprintf(over, sizeof over, "-");
        else
            snprintf(over, sizeof over, "%.2fx", x->overhead);
        fprintf(out, "  %-22s %-8s %-3s %8s  %9s  %8s  %s\n", x->impl, verdict_name(x->verdict),
                x->expected ? "yes" : "NO", ulp_format(x->max_ulp, ulp, sizeof ulp),
                percent_cell(x->memory_saved, saved, sizeof saved), over,
                x->first_divergence[0] ? x->first_divergence : "-");
        fprintf(out, "  %-22s   %s\n", "", x->reason);
    }
    if (r->status)
        fprintf(out, "  ERROR  %s\n", r->error);
}

struct summary {
    json_t *root;
    json_t *records;
};

int summary_create(struct summary **out, const char *git_rev, const char *harness_version)
{
    struct summary *s = calloc(1, sizeof *s);
    if (!s)
        return error_set(ST_RUN, "out of memory for the summary");
    char when[32];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    s->records = json_array();
    s->root = json_pack("{s:i, s:s, s:s, s:s, s:s, s:O}", "schema_version", 1, "harness_version", harness_version,
                        "git_rev", git_rev, "libtorch_version", aten_libtorch_version(), "created_utc", when,
                        "records", s->records);
    if (!s->root || !s->records) {
        summary_free(s);
        return error_set(ST_RUN, "out of memory for the summary");
    }
    *out = s;
    return ST_OK;
}

/* NaN is not JSON: it becomes null. */
static json_t *json_number(double v) { return isnan(v) || isinf(v) ? json_null() : json_real(v); }

int summary_add_case(struct summary *s, const struct case_result *r)
{
    if (r->n_results == 0) {
        json_t *rec = json_pack("{s:s, s:s, s:s, s:b}", "case", r->name, "impl", "*", "verdict", "ERROR", "expected", 0);
        json_object_set_new(rec, "reason", json_string(r->error));
        return json_array_append_new(s->records, rec) ? error_set(ST_RUN, "summary: out of memory") : ST_OK;
    }
    for (int i = 0; i < r->n_results; i++) {
        const struct impl_result *x = &r->results[i];
        json_t *rec = json_object();
        json_object_set_new(rec, "case", json_string(r->name));
        json_object_set_new(rec, "impl", json_string(x->impl));
        json_object_set_new(rec, "verdict", json_string(verdict_name(x->verdict)));
        json_object_set_new(rec, "expected", json_boolean(x->expected));
        json_object_set_new(rec, "reason", json_string(x->reason));
        json_object_set_new(rec, "first_divergence", json_string(x->first_divergence));
        json_object_set_new(rec, "max_ulp", x->max_ulp == ULP_INFINITE ? json_null() : json_integer((json_int_t)x->max_ulp));
        json_object_set_new(rec, "memory_saved", json_number(x->memory_saved));
        json_object_set_new(rec, "overhead", json_number(x->overhead));
        json_object_set_new(rec, "peak_bytes", json_number(x->peak_bytes));
        json_object_set_new(rec, "baseline_peak_bytes", json_number(r->baseline_peak_bytes));
        json_object_set_new(rec, "end_forward_bytes", json_number(x->end_forward_bytes));
        json_object_set_new(rec, "recomputes", json_integer(x->recomputes));
        json_object_set_new(rec, "noise_floor_ulp", json_integer((json_int_t)r->noise_floor_ulp));
        json_object_set_new(rec, "baseline_runs", json_integer(r->baseline_runs));
        json_object_set_new(rec, "h5", r->status ? json_null() : json_string(r->h5_path));
        if (json_array_append_new(s->records, rec))
            return error_set(ST_RUN, "summary: out of memory");
    }
    return ST_OK;
}

int summary_write(const struct summary *s, const char *dir)
{
    char path[1024], tmp[1100];
    snprintf(path, sizeof path, "%s/summary.json", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if (json_dump_file(s->root, tmp, JSON_INDENT(2) | JSON_SORT_KEYS) != 0) {
        remove(tmp);
        return error_set(ST_INPUT, "%s: cannot write", tmp);
    }
    if (rename(tmp, path) != 0) {
        remove(tmp);
        return error_set(ST_INPUT, "%s: cannot rename into place", path);
    }
    return ST_OK;
}

void summary_free(struct summary *s)
{
    if (!s)
        return;
    json_decref(s->root);
    json_decref(s->records);
    free(s);
}
