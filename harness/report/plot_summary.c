/* plot_summary: summary.json read into the records the plots draw: verdict,
 * distance (scaled ULP), memory and time per case and impl, and the case definition.
 * The numbers of runs that failed or errored are left out (NaN). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "plot_internal.h"

static double jnum(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static const char *jstr(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return json_is_string(v) ? json_string_value(v) : "";
}

static void read_def(const json_t *o, struct def *d)
{
    memset(d, 0, sizeof *d);
    if (!json_is_object(o) || !json_is_string(json_object_get(o, "model")))
        return;
    snprintf(d->model, sizeof d->model, "%s", jstr(o, "model"));
    snprintf(d->dtype, sizeof d->dtype, "%s", jstr(o, "dtype"));
    snprintf(d->fusion, sizeof d->fusion, "%s", jstr(o, "fusion"));
    snprintf(d->autocast, sizeof d->autocast, "%s", jstr(o, "autocast"));
    if (strcmp(jstr(o, "policy"), "none") != 0)
        snprintf(d->policy, sizeof d->policy, "%s", jstr(o, "policy"));
    d->layers = (int)jnum(o, "layers");
    d->hidden = (int)jnum(o, "hidden");
    d->seq = (int)jnum(o, "seq");
    d->batch = (int)jnum(o, "batch");
    d->heads = (int)jnum(o, "heads");
    d->dropout = jnum(o, "dropout");
    /* "every" is a string, a count a number */
    d->segments = json_is_number(json_object_get(o, "segments")) ? (int)jnum(o, "segments") : 0;
    d->ok = d->layers > 0 && d->hidden > 0 && d->seq > 0 && d->batch > 0;
}

int plot_summary_load(struct summary_in *s, const char *run_dir)
{
    char path[PATH_MAX_LEN];
    json_error_t err;
    memset(s, 0, sizeof *s);
    snprintf(path, sizeof path, "%s/summary.json", run_dir);
    if (!(s->root = json_load_file(path, 0, &err)))
        return error_set(ST_INPUT, "%s: %s", path, err.text);
    const json_t *records = json_object_get(s->root, "records");
    if (!json_is_array(records))
        return error_set(ST_INPUT, "%s: no \"records\" array", path);
    size_t n = json_array_size(records);
    if (!(s->r = calloc(n ? n : 1, sizeof *s->r)))
        return error_set(ST_RUN, "out of memory reading %s", path);
    for (size_t i = 0; i < n; i++) {
        const json_t *o = json_array_get(records, i);
        struct rec *r = &s->r[s->n];
        r->case_name = jstr(o, "case");
        r->impl = jstr(o, "impl");
        r->verdict = jstr(o, "verdict");
        r->expected = json_is_true(json_object_get(o, "expected"));
        if (!*r->case_name || !*r->impl || strcmp(r->impl, "*") == 0)
            continue; /* a case that could not run has no impl column */
        /* The verdict's distance: null is infinite, absent none measured. */
        const json_t *distance = json_object_get(o, "max_scaled_ulp");
        r->distance = json_is_number(distance) ? json_number_value(distance) : json_is_null(distance) ? INFINITY : NAN;
        r->decided_by = jstr(o, "decided_by");
        r->role = jstr(o, "role");
        r->overhead = jnum(o, "overhead");
        r->overhead_stable = !json_is_false(json_object_get(o, "overhead_stable"));
        r->ideal_overhead = jnum(o, "ideal_overhead");
        r->baseline_step_ms = jnum(o, "baseline_step_ms");
        r->slowest_baseline_step_ms = jnum(o, "slowest_baseline_step_ms");
        r->peak = jnum(o, "peak_bytes");
        r->base_peak = jnum(o, "baseline_peak_bytes");
        r->efb = jnum(o, "end_forward_bytes");
        r->pred_efb = jnum(o, "predicted_end_forward_bytes");
        r->base_efb = jnum(o, "baseline_end_forward_bytes");
        r->pred_base_efb = jnum(o, "predicted_baseline_end_forward_bytes");
        r->grad = jnum(o, "grad_bytes");
        r->base_grad = jnum(o, "baseline_grad_bytes");
        r->act = jnum(o, "activation_peak_bytes");
        r->base_act = jnum(o, "baseline_activation_peak_bytes");
        /* A run that failed or errored did not do the case's work: its
         * bytes and time are no measurement of checkpointing. */
        if (!strcmp(r->verdict, "FAIL") || !strcmp(r->verdict, "ERROR"))
            r->peak = r->efb = r->grad = r->act = r->overhead = NAN;
        read_def(json_object_get(o, "case_definition"), &r->d);
        s->n++;
    }
    return ST_OK;
}

void plot_summary_free(struct summary_in *s)
{
    free(s->r);
    json_decref(s->root);
}

/* A harness reference impl (not a planted bug, not `none`), or a run the
 * harness does not know (a Python-verified or --external producer's own
 * checkpoint, judged as it is): a run whose memory and time are drawn. */
int plot_is_measured_impl(const struct rec *r)
{
    return strcmp(r->role, RUN_ROLE_PLAIN) != 0 && strcmp(r->role, RUN_ROLE_PLANTED_BUG) != 0;
}

/* Distinct impls of the records, in order of appearance. */
int plot_list_impls(const struct summary_in *s, int references_only, const char **out, int max)
{
    int n = 0;
    for (int i = 0; i < s->n; i++) {
        const char *name = s->r[i].impl;
        if (references_only && !plot_is_measured_impl(&s->r[i]))
            continue;
        int k = 0;
        while (k < n && strcmp(out[k], name) != 0)
            k++;
        if (k == n && n < max)
            out[n++] = name;
    }
    return n;
}
