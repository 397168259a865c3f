#include "report.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "blas_info.h"
#include "compare.h"
#include "error.h"
#include "h5store.h"
#include "summary_file.h"

static const char *percent_cell(double v, char *buf, size_t len)
{
    if (isnan(v))
        snprintf(buf, len, "-");
    else
        snprintf(buf, len, "%.1f%%", 100.0 * v);
    return buf;
}

/* Bytes in the largest binary unit that keeps them >= 1 ("48.0 MiB"). */
static const char *bytes_cell(double v, char *buf, size_t len)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB"};
    int u = 0;
    if (isnan(v)) {
        snprintf(buf, len, "-");
        return buf;
    }
    while (u < 3 && fabs(v) >= 1024) {
        v /= 1024;
        u++;
    }
    snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", v, units[u]);
    return buf;
}

static const char *ms_cell(double v, char *buf, size_t len)
{
    if (isnan(v))
        snprintf(buf, len, "-");
    else
        snprintf(buf, len, "%.3g ms", v);
    return buf;
}

/* Measured bytes held at the end of forward against the model's
 * prediction (model_predict_saved_bytes), and the step time: the figures
 * checkpointing is about, one line per run. */
static void print_memory_line(FILE *out, int width, const char *what, double held, double predicted, double peak,
                              double step_ms, double forward_ms)
{
    char a[32], b[32], c[32], d[32], e[32];
    fprintf(out, "  %-*s   held at end of forward %s (predicted %s", width, what, bytes_cell(held, a, sizeof a),
            bytes_cell(predicted, b, sizeof b));
    if (predicted > 0 && !isnan(held))
        fprintf(out, ", %+.1f%%", 100.0 * (held - predicted) / predicted);
    fprintf(out, "), peak %s, step %s (forward %s)\n", bytes_cell(peak, c, sizeof c), ms_cell(step_ms, d, sizeof d),
            ms_cell(forward_ms, e, sizeof e));
}

/* A user's run (python/ckpt_verify): what it held at the end of forward
 * on its judged step beside its statement (docs/memory.md), and the ops
 * its backwards re-ran; or why its memory was not judged. */
static void print_user_memory_line(FILE *out, int width, const struct impl_result *x)
{
    char a[32], b[32], c[32], d[32], e[32];
    if (strcmp(text_str(&x->memory_judged), "judged") != 0) {
        fprintf(out, "  %-*s   memory %s; peak %s, step %s (forward %s)\n", width, "", text_str(&x->memory_judged),
                bytes_cell(x->peak_bytes, c, sizeof c), ms_cell(x->step_ms, d, sizeof d),
                ms_cell(x->forward_ms, e, sizeof e));
        return;
    }
    fprintf(out, "  %-*s   held at end of forward %s vs stated %s (step %d", width, "",
            bytes_cell(x->judged_held_bytes, a, sizeof a), bytes_cell(x->stated_end_forward_bytes, b, sizeof b),
            x->memory_step);
    if (!isnan(x->judged_held_bytes) && x->judged_held_bytes != x->stated_end_forward_bytes)
        fprintf(out, ", %+.0f B", x->judged_held_bytes - x->stated_end_forward_bytes);
    fprintf(out, "), recomputed ops %d, peak %s, step %s (forward %s)\n", x->memory_recomputed_ops,
            bytes_cell(x->peak_bytes, c, sizeof c), ms_cell(x->step_ms, d, sizeof d),
            ms_cell(x->forward_ms, e, sizeof e));
}

/* The verdict's distance from baseline_0 in scaled ULP (the largest over
 * every tensor of max |a - b| in ULPs of the dtype at max |a|): what the
 * judge's envelope measured and the one distance the table, the summary,
 * the plots and JUnit show. NAN where no distance was measured: an ERROR,
 * or a FAIL stopped before any gradient differed (the checkpoint's own
 * check, a missing or incomparable tensor). A FAIL of a run check alone
 * (hooks, leaks) measured its gradients: 0 when they are bitwise right. */
double report_verdict_distance(const struct impl_result *x)
{
    if (x->verdict == V_ERROR || x->decided_by[0] ||
        (x->verdict == V_FAIL && !x->gradients_right && x->max_scaled_ulp == 0 && x->max_ulp == 0))
        return NAN;
    return x->max_scaled_ulp;
}

/* A record always says why: a reason left empty (a run that ended in an
 * error with no message, a case that judged nothing) is named as such. */
static const char *reason_text(const struct impl_result *x)
{
    if (text_len(&x->reason))
        return text_str(&x->reason);
    return x->verdict == V_ERROR ? "the run ended in an error and recorded no message" : "no reason recorded";
}

/* The reason under a row: whole, or shortened (report.h) past
 * REPORT_TABLE_REASON_MAX bytes, so one long reason does not bury the table. */
static void print_reason(FILE *out, int width, const char *reason)
{
    size_t len = strlen(reason), shown = len;
    if (len > REPORT_TABLE_REASON_MAX) {
        shown = REPORT_TABLE_REASON_MAX;
        /* At the last space within the limit; else never inside a UTF-8 character. */
        while (shown > REPORT_TABLE_REASON_MAX / 2 && reason[shown] != ' ')
            shown--;
        if (reason[shown] != ' ')
            for (shown = REPORT_TABLE_REASON_MAX; shown > 0 && ((unsigned char)reason[shown] & 0xC0) == 0x80;)
                shown--;
    }
    fprintf(out, "  %-*s   %.*s", width, "", (int)shown, reason);
    if (shown < len)
        fprintf(out, " ... [%zu more bytes; the whole reason is in summary.json, report.html and junit.xml]",
                len - shown);
    fputc('\n', out);
}

static const char *case_error_text(const struct case_result *r)
{
    return r->error[0] ? r->error : "no run was judged";
}

/* The verdict's distance, or what decided the verdict where no distance
 * did (a tensor missing on one side: "missing tensor"). */
static const char *distance_cell(const struct impl_result *x, char *buf, size_t len)
{
    double v = report_verdict_distance(x);
    if (x->decided_by[0])
        snprintf(buf, len, "%s", x->decided_by);
    else if (isnan(v))
        snprintf(buf, len, "-");
    else
        scaled_ulp_format(v, buf, len);
    return buf;
}

/* The impl column's width: the longest impl name of the case, at least
 * 24, so a long name never pushes the other columns out of line. */
static int impl_width(const struct case_result *r)
{
    size_t w = 24;
    for (int i = 0; i < r->n_results; i++)
        if (strlen(r->results[i].impl) > w)
            w = strlen(r->results[i].impl);
    return (int)w;
}

void report_print_case(FILE *out, const struct case_result *r)
{
    char ulp[32], saved[32], over[32], noise[RUN_PATH_MAX + 96];
    if (r->baseline_runs < 2)
        snprintf(noise, sizeof noise, "unmeasured");
    else if (r->noise_floor_scaled == 0 && r->noise_floor_ulp == 0)
        snprintf(noise, sizeof noise, "bitwise");
    else
        snprintf(noise, sizeof noise, "up to %.3g scaled ULP, %s; raw max ULP %s", r->noise_floor_scaled,
                 r->noise_floor_path, ulp_format(r->noise_floor_ulp, ulp, sizeof ulp));
    fprintf(out, "case %s  (baselines: %d, noise: %s)  -> %s\n", r->name, r->baseline_runs, noise,
            r->status ? "not written" : r->h5_path[0] ? r->h5_path : "no HDF5 file");
    if (r->n_results == 0) {
        fprintf(out, "  ERROR  %s\n", case_error_text(r));
        return;
    }
    int w = impl_width(r);
    print_memory_line(out, w, "baseline", r->baseline_end_forward_bytes, r->predicted_baseline_end_forward_bytes,
                      r->baseline_peak_bytes, r->baseline_step_ms, r->baseline_forward_ms);
    if (r->one_time_bytes > 0)
        fprintf(out, "  %-*s   warm-up left %s allocated (library workspaces): kept out of every figure\n", w, "",
                bytes_cell(r->one_time_bytes, saved, sizeof saved));
    /* "scaled ULP": the verdict's distance (report_verdict_distance); the
     * raw element-wise max ULP is in the reason, labelled raw. "held cut":
     * bytes held at the end of forward, what checkpointing exists to cut;
     * "peak cut": the drop in the step's peak, which small cases' backward
     * buffers can outweigh. The distance column is as wide as the words
     * that may stand in it ("missing tensor"). */
    fprintf(out, "  %-*s %-14s %-3s %14s  %8s  %8s  %9s  %s\n", w, "impl", "verdict", "ok", "scaled ULP", "held cut",
            "peak cut", "overhead", "first divergence");
    for (int i = 0; i < r->n_results; i++) {
        const struct impl_result *x = &r->results[i];
        if (isnan(x->overhead) || isinf(x->overhead))
            snprintf(over, sizeof over, "-");
        else
            snprintf(over, sizeof over, "%.2fx%s", x->overhead, x->timing_stable ? "" : "?");
        char held[32];
        /* A twin not judged shows no verdict: "n/j", the reason says why. */
        fprintf(out, "  %-*s %-14s %-3s %14s  %8s  %8s  %9s  %s\n", w, x->impl,
                x->not_judged && !r->status ? "n/j" : verdict_name(x->verdict),
                x->not_judged && !r->status ? "-" : x->expected && !r->status ? "yes" : "NO",
                distance_cell(x, ulp, sizeof ulp),
                percent_cell(x->end_forward_saved, held, sizeof held), percent_cell(x->memory_saved, saved, sizeof saved),
                over, text_len(&x->first_divergence) ? text_str(&x->first_divergence) : "-");
        print_reason(out, w, reason_text(x));
        /* PyTorch's debug=True log under the reason, one row a line. */
        for (const char *row = text_str(&x->op_log); *row;) {
            size_t len = strcspn(row, "\n");
            fprintf(out, "  %-*s     %.*s\n", w, "", (int)len, row);
            row += len + (row[len] == '\n');
        }
        if (text_len(&x->memory_judged) && strcmp(text_str(&x->memory_judged), "control") != 0)
            print_user_memory_line(out, w, x);
        else
            print_memory_line(out, w, "", x->end_forward_bytes, x->predicted_end_forward_bytes, x->peak_bytes,
                              x->step_ms, x->forward_ms);
        if (x->overhead_withheld)
            fprintf(out, "  %-*s   overhead not shown: %s\n", w, "", x->timing_note);
        else if (!x->timing_stable && x->timing_note[0] && !isnan(x->overhead))
            fprintf(out, "  %-*s   overhead marked ?: %s\n", w, "", x->timing_note);
    }
    if (r->status)
        fprintf(out, "  ERROR  %s\n", r->error);
}

struct summary {
    json_t *root;
    json_t *records;
};

/* A string, or null for NULL or "". */
static json_t *json_text_or_null(const char *s) { return s && s[0] ? json_string(s) : json_null(); }

int summary_create(struct summary **out, const char *git_rev, const char *harness_version,
                   const struct summary_torch *torch)
{
    struct summary *s = calloc(1, sizeof *s);
    if (!s)
        return error_set(ST_RUN, "out of memory for the summary");
    char when[32];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    struct blas_info blas;
    blas_info_detect(&blas);
    s->records = json_array();
    s->root = json_pack("{s:i, s:s, s:s, s:o, s:o, s:o, s:s, s:s, s:O}", "schema_version", 1, "harness_version",
                        harness_version, "git_rev", git_rev, "libtorch_version",
                        json_text_or_null(torch ? torch->version : NULL), "torch_cuda",
                        json_text_or_null(torch ? torch->cuda : NULL), "torch_pinned",
                        json_text_or_null(torch ? torch->pinned : NULL), "blas", blas.name, "created_utc", when,
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

/* Every record names the builds that made it: shards merged from different
 * builds would otherwise be indistinguishable. */
static void add_run_facts(const struct summary *s, json_t *rec, int case_index, double seconds)
{
    static const char *const keys[] = {"harness_version", "libtorch_version", "git_rev"};
    for (size_t k = 0; k < sizeof keys / sizeof *keys; k++)
        json_object_set(rec, keys[k], json_object_get(s->root, keys[k]));
    if (case_index >= 0)
        json_object_set_new(rec, "case_index", json_integer(case_index));
    if (!isnan(seconds))
        json_object_set_new(rec, "case_seconds", json_real(seconds));
}

int summary_add_case(struct summary *s, const struct case_result *r) { return summary_add_case_run(s, r, -1, NAN); }

/* Case keys as JSON: whole numbers as integers, other numbers as reals,
 * the rest (names, lists, a seed beyond int64) as strings. */
static void add_case_attr(void *ctx, const char *key, const char *value)
{
    long long i;
    double d;
    enum case_value_kind kind = case_value_kind(value, &i, &d);
    json_object_set_new(ctx, key, kind == CASE_VALUE_INT    ? json_integer(i)
                                  : kind == CASE_VALUE_REAL ? json_real(d)
                                                            : json_string(value));
}

/* The same for a /case attribute of another producer's file, as stored. */
static int add_stored_case_attr(void *ctx, const char *key, const char *value)
{
    add_case_attr(ctx, key, value);
    return ST_OK;
}

/* Memory and time of one record (docs/schema.md has the same figures per
 * run), and the case definition so plots can group and label records
 * without the case files. */
static void add_memory_time(json_t *rec, const struct case_result *r, const struct impl_result *x)
{
    const struct { const char *key; double v; } f[] = {
        {"predicted_end_forward_bytes", x->predicted_end_forward_bytes},
        {"forward_peak_bytes", x->forward_peak_bytes},
        {"backward_peak_bytes", x->backward_peak_bytes},
        {"grad_bytes", x->grad_bytes},
        {"activation_peak_bytes", x->activation_peak_bytes},
        {"forward_ms", x->forward_ms},
        {"backward_ms", x->backward_ms},
        {"recompute_ms", x->recompute_ms},
        {"recomputed_ops_ms", x->recomputed_ops_ms},
        {"step_ms", x->step_ms},
        {"baseline_end_forward_bytes", x->baseline_end_forward_bytes},
        {"predicted_baseline_end_forward_bytes", r->predicted_baseline_end_forward_bytes},
        {"baseline_grad_bytes", r->baseline_grad_bytes},
        {"baseline_activation_peak_bytes", r->baseline_activation_peak_bytes},
        {"param_bytes", r->param_bytes},
        {"baseline_forward_ms", r->baseline_forward_ms},
        {"baseline_step_ms", x->baseline_step_ms},
        /* the slowest of the same baselines: overhead's spread (the harness's
         * family; an external producer's baselines keep theirs to themselves) */
        {"slowest_baseline_step_ms",
         strncmp(x->overhead_baseline, "baseline_", 9) == 0 ? r->slowest_baseline_step_ms : NAN},
        {"ideal_overhead", r->ideal_overhead},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        json_object_set_new(rec, f[i].key, json_number(f[i].v));
    json_object_set_new(rec, "timed_steps", json_integer(r->timed_steps));
    json_t *def = json_object();
    if (!r->definition_from_producer) {
        case_foreach_attr(&r->definition, add_case_attr, def);
    } else if (h5store_has_group(r->h5_path, "/case")) {
        /* The file was read whole by the judge a moment ago; a failure here
         * leaves the definition out, never the record. */
        if (h5store_foreach_attr(r->h5_path, "/case", add_stored_case_attr, def) != ST_OK)
            json_object_clear(def);
        error_clear();
    }
    if (json_object_size(def) > 0)
        json_object_set_new(rec, "case_definition", def);
    else
        json_decref(def); /* another producer's file without /case: nothing to describe */
}

/* A producer's tensor list ("N tensor(s), B B: a (n B); b (m B); ...",
 * memory_map.describe) as a JSON list of its entries. */
static json_t *tensor_list(const char *text)
{
    json_t *list = json_array();
    const char *p = strstr(text, ": ");
    for (p = p ? p + 2 : text; *p;) {
        size_t len = strcspn(p, ";");
        if (len)
            json_array_append_new(list, json_stringn(p, len));
        p += len;
        while (*p == ';' || *p == ' ')
            p++;
    }
    return list;
}

/* A user's run's memory (judge.h): whether and how it was judged, its
 * statement beside what it held, the recomputed ops, and the tensors it
 * holds beyond its baseline (extras) and as state, as lists. */
static void add_user_memory(json_t *rec, const struct impl_result *x)
{
    if (!text_len(&x->memory_judged))
        return;
    json_object_set_new(rec, "memory", json_string(text_str(&x->memory_judged)));
    if (strcmp(text_str(&x->memory_judged), "judged") != 0)
        return;
    json_object_set_new(rec, "stated_end_forward_bytes", json_number(x->stated_end_forward_bytes));
    json_object_set_new(rec, "judged_held_bytes", json_number(x->judged_held_bytes));
    json_object_set_new(rec, "memory_step", json_integer(x->memory_step));
    json_object_set_new(rec, "recomputed_ops", json_integer(x->memory_recomputed_ops));
    json_object_set_new(rec, "memory_statement", json_string(text_str(&x->memory_statement)));
    json_object_set_new(rec, "memory_extras", tensor_list(text_str(&x->memory_extra)));
    json_object_set_new(rec, "memory_state", tensor_list(text_str(&x->memory_state)));
}

/* The judge's per-tensor distances (judge.h tensor_distances), as it
 * computed them: a report shows them per tensor and step without
 * recomputing anything. Infinite figures are null. */
static void add_tensor_distances(json_t *rec, const struct impl_result *x)
{
    json_t *list = json_array();
    for (int k = 0; k < x->n_tensor_distances; k++) {
        const struct tensor_distance *t = &x->tensor_distances[k];
        json_t *o = json_pack("{s:s, s:o, s:o, s:o}", "tensor", t->path, "scaled_ulp", json_number(t->scaled_ulp),
                              "spread", json_number(t->spread), "limit", json_number(t->limit));
        /* An integer tensor's figures are differences of values, not ULPs. */
        if (o && t->values)
            json_object_set_new(o, "values", json_true());
        json_array_append_new(list, o);
    }
    json_object_set_new(rec, "tensor_distances", list);
    json_object_set_new(rec, "tensors_differing", json_integer(x->tensors_differing));
}

int summary_add_case_run(struct summary *s, const struct case_result *r, int case_index, double seconds)
{
    if (r->n_results == 0) {
        json_t *rec = json_pack("{s:s, s:s, s:s, s:b}", "case", r->name, "impl", "*", "verdict", "ERROR", "expected", 0);
        json_object_set_new(rec, "reason", json_string(case_error_text(r)));
        add_run_facts(s, rec, case_index, seconds);
        return json_array_append_new(s->records, rec) ? error_set(ST_RUN, "summary: out of memory") : ST_OK;
    }
    for (int i = 0; i < r->n_results; i++) {
        const struct impl_result *x = &r->results[i];
        json_t *rec = json_object();
        json_object_set_new(rec, "case", json_string(r->name));
        json_object_set_new(rec, "impl", json_string(x->impl));
        if (r->status) {
            /* Judged, but the report could not be written (a full disk):
             * an error the run must not publish as green, whatever the
             * gradients said. The judged verdict stays, under its name. */
            struct text why = {0};
            text_setf(&why, "report not written: %s (judged %s: %s)", case_error_text(r), verdict_name(x->verdict),
                      reason_text(x));
            json_object_set_new(rec, "verdict", json_string("ERROR"));
            json_object_set_new(rec, "expected", json_false());
            json_object_set_new(rec, "reason", json_string(text_str(&why)));
            int st = text_check(&why, "a summary's reason");
            text_free(&why);
            if (st) {
                json_decref(rec);
                return st;
            }
            json_object_set_new(rec, "judged_verdict", json_string(verdict_name(x->verdict)));
        } else {
            json_object_set_new(rec, "verdict", json_string(verdict_name(x->verdict)));
            json_object_set_new(rec, "expected", json_boolean(x->expected));
            json_object_set_new(rec, "reason", json_string(reason_text(x)));
        }
        /* What the run was expected to get ("PASS|NOISE"), and whether it
         * was judged at all: a twin its run explains is not, its verdict
         * being only what was measured (reports show "n/j"). */
        char wanted[64];
        json_object_set_new(rec, "expected_verdicts",
                            json_string(verdict_mask_text(x->expected_mask, wanted, sizeof wanted)));
        json_object_set_new(rec, "judged", json_boolean(!x->not_judged));
        json_object_set_new(rec, "first_divergence", json_string(text_str(&x->first_divergence)));
        /* The verdict's distance (null: infinite; absent: none measured)
         * and, labelled raw, the element-wise max ULP (null: infinite). */
        double distance = report_verdict_distance(x);
        if (x->decided_by[0])
            json_object_set_new(rec, "decided_by", json_string(x->decided_by));
        if (x->role[0])
            json_object_set_new(rec, "role", json_string(x->role));
        if (!isnan(distance))
            json_object_set_new(rec, "max_scaled_ulp", isinf(distance) ? json_null() : json_real(distance));
        json_object_set_new(rec, "raw_max_ulp",
                            x->max_ulp == ULP_INFINITE ? json_null() : json_integer((json_int_t)x->max_ulp));
        /* The two cuts by their names; memory_saved and end_forward_saved
         * are their older names, kept for summaries compared across versions. */
        json_object_set_new(rec, "peak_cut", json_number(x->memory_saved));
        json_object_set_new(rec, "held_cut", json_number(x->end_forward_saved));
        json_object_set_new(rec, "memory_saved", json_number(x->memory_saved));
        json_object_set_new(rec, "overhead", json_number(x->overhead));
        json_object_set_new(rec, "overhead_stable", json_boolean(x->timing_stable));
        if (x->timing_note[0])
            json_object_set_new(rec, "overhead_unstable_because", json_string(x->timing_note));
        json_object_set_new(rec, "peak_bytes", json_number(x->peak_bytes));
        /* The references this record's ratios divide by: its own baseline
         * family's (an external producer's runs are judged against theirs). */
        json_object_set_new(rec, "baseline_peak_bytes", json_number(x->baseline_peak_bytes));
        json_object_set_new(rec, "overhead_baseline", json_string(x->overhead_baseline));
        json_object_set_new(rec, "end_forward_bytes", json_number(x->end_forward_bytes));
        json_object_set_new(rec, "recomputes", json_integer(x->recomputes));
        add_user_memory(rec, x);
        if (x->tensors_differing)
            add_tensor_distances(rec, x);
        json_object_set_new(rec, "raw_noise_floor_ulp", json_integer((json_int_t)r->noise_floor_ulp));
        json_object_set_new(rec, "noise_floor_scaled_ulp", json_number(r->noise_floor_scaled));
        json_object_set_new(rec, "noise_ratio", json_number(x->noise_ratio));
        json_object_set_new(rec, "bitwise_tensors_differ", json_integer(x->bitwise_tensors_differ));
        if (x->input_grads_only_in_run) {
            json_object_set_new(rec, "input_grads_only_in_run", json_integer(x->input_grads_only_in_run));
            json_object_set_new(rec, "first_input_grad_only_in_run", json_string(x->first_input_grad_only_in_run));
        }
        json_object_set_new(rec, "end_forward_saved", json_number(x->end_forward_saved));
        json_object_set_new(rec, "one_time_bytes", json_number(r->one_time_bytes));
        json_object_set_new(rec, "baseline_runs", json_integer(r->baseline_runs));
        json_object_set_new(rec, "h5", r->status || !r->h5_path[0] ? json_null() : json_string(r->h5_path));
        add_memory_time(rec, r, x);
        add_run_facts(s, rec, case_index, seconds);
        if (json_array_append_new(s->records, rec))
            return error_set(ST_RUN, "summary: out of memory");
    }
    return ST_OK;
}

int summary_set_run(struct summary *s, const char *suite, int shard_k, int shard_n)
{
    char shard[32];
    snprintf(shard, sizeof shard, "%d/%d", shard_k, shard_n);
    if ((suite && json_object_set_new(s->root, "suite", json_string(suite))) ||
        json_object_set_new(s->root, "shard", json_string(shard)))
        return error_set(ST_RUN, "summary: out of memory");
    return ST_OK;
}

const struct json_t *summary_json(const struct summary *s) { return s->root; }

struct json_t *summary_root(struct summary *s) { return s->root; }

int summary_set_regressions(struct summary *s, json_t *regressions)
{
    return json_object_set(s->root, "regressions", regressions) ? error_set(ST_INTERNAL, "summary: out of memory")
                                                                 : ST_OK;
}

/* Seconds since this process started (Linux: its start time in
 * /proc/self/stat against the uptime), or NAN where that cannot be read:
 * the command's own wall time, library loading and warm-up included,
 * which the cases' own times leave out. */
static double process_seconds(void)
{
    double uptime = NAN;
    unsigned long long start = 0;
    FILE *f = fopen("/proc/uptime", "r");
    if (f) {
        if (fscanf(f, "%lf", &uptime) != 1)
            uptime = NAN;
        fclose(f);
    }
    char line[1024];
    f = fopen("/proc/self/stat", "r");
    if (!f)
        return NAN;
    size_t n = fread(line, 1, sizeof line - 1, f);
    fclose(f);
    line[n] = '\0';
    /* Field 22 (starttime, clock ticks since boot) counts from after the
     * command name, which may hold spaces: start after its ')'. */
    const char *p = strrchr(line, ')');
    for (int field = 2; p && field < 22; field++)
        p = strchr(p + 1, ' ');
    long ticks = sysconf(_SC_CLK_TCK);
    if (!p || sscanf(p + 1, "%llu", &start) != 1 || ticks <= 0 || isnan(uptime))
        return NAN;
    double age = uptime - (double)start / (double)ticks;
    return age >= 0 ? age : NAN;
}

void summary_set_wall_time(struct summary *s)
{
    double wall = process_seconds();
    if (!isnan(wall))
        json_object_set_new(s->root, "wall_seconds", json_real(wall));
}

int summary_write(const struct summary *s, const char *dir) { return summary_file_write(s->root, dir, "summary.json"); }

void summary_free(struct summary *s)
{
    if (!s)
        return;
    json_decref(s->root);
    json_decref(s->records);
    free(s);
}
