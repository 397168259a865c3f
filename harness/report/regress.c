#include "regress.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "case.h"
#include "compare.h"
#include "error.h"
#include "summary_file.h"

enum finding { F_NONE = 0, F_NOISE, F_IMPROVED, F_CHANGED, F_REGRESSION }; /* by precedence for the line's tag */

static const char *const finding_tag[] = {"", "noise", "improved", "changed", "REGRESSION"};

struct line {
    enum finding kind;
    char text[1024];
};

static void add(struct line *l, enum finding kind, const char *fmt, const char *a, const char *b)
{
    size_t used = strlen(l->text);
    if (used < sizeof l->text)
        snprintf(l->text + used, sizeof l->text - used, "%s", used ? "; " : "");
    used = strlen(l->text);
    if (used < sizeof l->text)
        snprintf(l->text + used, sizeof l->text - used, fmt, a, b);
    if (kind > l->kind)
        l->kind = kind;
}

void regress_default_options(struct regress_options *o)
{
    o->memory_points = 0.02;
    o->overhead_ratio = 0.10;
    o->list_removed = 0;
}

/* The verdict's distance, max_scaled_ulp, as a number: null is infinite;
 * absent (none measured) is NaN. */
static double distance_of(const json_t *rec)
{
    const json_t *v = json_object_get(rec, "max_scaled_ulp");
    return json_is_null(v) ? INFINITY : summary_num(rec, "max_scaled_ulp");
}

/* The baselines' raw noise floor; older summaries call it noise_floor_ulp. */
static double raw_noise_floor_of(const json_t *rec)
{
    return json_object_get(rec, "raw_noise_floor_ulp") ? summary_num(rec, "raw_noise_floor_ulp")
                                                        : summary_num(rec, "noise_floor_ulp");
}

static void compare_verdicts(const json_t *p, const json_t *c, struct line *l)
{
    int pv = summary_verdict(p), cv = summary_verdict(c);
    int pe = summary_bool(p, "expected"), ce = summary_bool(c, "expected");
    const char *pn = verdict_name(pv), *cn = verdict_name(cv);
    if (pv != cv) {
        if (pv == V_NOT_OBSERVABLE || cv == V_NOT_OBSERVABLE)
            add(l, F_CHANGED, "verdict %s -> %s", pn, cn);
        else if (cv < pv)
            add(l, F_IMPROVED, "verdict %s -> %s", pn, cn);
        else if (pv == V_PASS && cv == V_NOISE && raw_noise_floor_of(p) != 0)
            add(l, F_NOISE, "verdict %s -> %s (the baseline already differed from itself)", pn, cn);
        else
            add(l, F_REGRESSION, "verdict %s -> %s", pn, cn);
    }
    if (pe && !ce)
        add(l, F_REGRESSION, "%s%s", "no longer the verdict the case expects", "");
    else if (!pe && ce)
        add(l, F_IMPROVED, "%s%s", "now the verdict the case expects", "");
    /* A larger distance is a regression only for a run that PASSed (within
     * the case's tolerance) and still does. Once a run is FAIL its distance
     * measures the bug (a planted one, on purpose) and wobbles with any
     * kernel noise under it (the atomic dbias: 2087189301 -> 2087189306 ULP
     * between two nightlies of one build); such a run is judged on its
     * verdict and expectation above. NOISE runs are within their envelope. */
    double pu = distance_of(p), cu = distance_of(c);
    char a[32], b[32];
    if (pv == V_PASS && cv == V_PASS && !isnan(pu) && !isnan(cu) && cu > pu)
        add(l, F_REGRESSION, "scaled ULP %s -> %s", scaled_ulp_format(pu, a, sizeof a),
            scaled_ulp_format(cu, b, sizeof b));
}

/* A cut (a fraction of the baseline's bytes) that moved by more than
 * `points`: smaller is a regression. */
static void compare_cut(const json_t *p, const json_t *c, const char *key, const char *what, double points,
                        struct line *l)
{
    double pm = summary_num(p, key), cm = summary_num(c, key);
    if (isnan(pm) || isnan(cm) || fabs(cm - pm) <= points)
        return;
    char a[32], b[32], d[32], fmt[64];
    snprintf(a, sizeof a, "%.1f%%", 100 * pm);
    snprintf(d, sizeof d, "%+.1f", 100 * (cm - pm));
    snprintf(b, sizeof b, "%.1f%% (%s points)", 100 * cm, d);
    snprintf(fmt, sizeof fmt, "%s %%s -> %%s", what);
    add(l, cm < pm ? F_REGRESSION : F_IMPROVED, fmt, a, b);
}

/* A user's run (summary "memory": "judged"): its bytes held above its
 * memory statement on the judged step. Growing by more than the floor a
 * user's run is held to is a regression, even where both verdicts pass. */
static void compare_statement_gap(const json_t *p, const json_t *c, struct line *l)
{
    double pg = summary_num(p, "judged_held_bytes") - summary_num(p, "stated_end_forward_bytes");
    double cg = summary_num(c, "judged_held_bytes") - summary_num(c, "stated_end_forward_bytes");
    if (isnan(pg) || isnan(cg) || fabs(cg - pg) <= REGRESS_STATEMENT_GAP_BYTES)
        return;
    char a[48], b[48];
    snprintf(a, sizeof a, "%+.0f B", pg);
    snprintf(b, sizeof b, "%+.0f B", cg);
    add(l, cg > pg ? F_REGRESSION : F_IMPROVED, "held above its memory statement %s -> %s", a, b);
}

static void compare_memory(const json_t *p, const json_t *c, double points, struct line *l)
{
    compare_cut(p, c, "memory_saved", "memory saved", points, l);
    compare_cut(p, c, "held_cut", "held cut", points, l);
    compare_statement_gap(p, c, l);
}

/* Collects new/old overhead of a common record under its impl: only runs
 * whose gradients were right in both summaries, since the overhead of a
 * failing or planted-bug run measures nothing anyone ships. */
static void accumulate_overhead(json_t *ratios, const json_t *p, const json_t *c)
{
    double po = summary_num(p, "overhead"), co = summary_num(c, "overhead");
    int pv = summary_verdict(p), cv = summary_verdict(c);
    if (!(po > 0) || !(co > 0) || isinf(po) || isinf(co) || pv > V_NOISE || cv > V_NOISE)
        return;
    const char *impl = summary_str(c, "impl");
    json_t *list = json_object_get(ratios, impl);
    if (!list) {
        list = json_array();
        json_object_set_new(ratios, impl, list);
    }
    json_array_append_new(list, json_real(co / po));
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median of the ratios of one impl; 0 when empty. */
static double median_ratio(const json_t *list)
{
    size_t n = json_array_size(list);
    double *v = n ? malloc(n * sizeof *v) : NULL;
    if (!v)
        return 0.0;
    for (size_t i = 0; i < n; i++)
        v[i] = json_real_value(json_array_get(list, i));
    qsort(v, n, sizeof *v, by_value);
    double m = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    free(v);
    return m;
}

static void key_of(const json_t *rec, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s", summary_str(rec, "case"), summary_str(rec, "impl"));
}

/* One regression in the caller's list (regress.h); out of memory only
 * shortens the list, the printed line and the count stay. */
static void list_regression(json_t *regressions, const char *c, const char *impl, const char *finding,
                            const char *against)
{
    if (regressions)
        json_array_append_new(regressions, json_pack("{s:s, s:s, s:s, s:s}", "case", c, "impl", impl, "finding",
                                                     finding, "against", against));
}

int regress_compare(const json_t *prev, const json_t *cur, const char *prev_label, const struct regress_options *o,
                    FILE *out, struct regress_counts *counts, json_t *regressions)
{
    struct regress_counts n = {0};
    json_t *prev_by_key = json_object(), *cur_keys = json_object(), *sums = json_object();
    int st = ST_OK;
    if (!prev_by_key || !cur_keys || !sums) {
        st = error_set(ST_INTERNAL, "compare: out of memory");
        goto done;
    }
    const json_t *prev_records = json_object_get(prev, "records"), *cur_records = json_object_get(cur, "records");
    char key[256];
    for (size_t i = 0; i < json_array_size(prev_records); i++) {
        json_t *rec = json_array_get(prev_records, i);
        key_of(rec, key, sizeof key);
        json_object_set(prev_by_key, key, rec);
    }
    fprintf(out, "compare to %s (git %s, %s)\n", prev_label, summary_str(prev, "git_rev")[0] ? summary_str(prev, "git_rev") : "?",
            summary_str(prev, "created_utc")[0] ? summary_str(prev, "created_utc") : "?");
    for (size_t i = 0; i < json_array_size(cur_records); i++) {
        const json_t *c = json_array_get(cur_records, i);
        key_of(c, key, sizeof key);
        json_object_set_new(cur_keys, key, json_true());
        const json_t *p = json_object_get(prev_by_key, key);
        if (!p) {
            n.added++;
            fprintf(out, "  %-10s  %s: %s\n", "new", key, summary_str(c, "verdict"));
            continue;
        }
        n.common++;
        struct line l = {F_NONE, ""};
        compare_verdicts(p, c, &l);
        compare_memory(p, c, o->memory_points, &l);
        accumulate_overhead(sums, p, c);
        n.regressions += l.kind == F_REGRESSION;
        n.changed += l.kind == F_CHANGED;
        n.improvements += l.kind == F_IMPROVED;
        n.noise += l.kind == F_NOISE;
        if (l.kind != F_NONE)
            fprintf(out, "  %-10s  %s: %s\n", finding_tag[l.kind], key, l.text);
        if (l.kind == F_REGRESSION)
            list_regression(regressions, summary_str(c, "case"), summary_str(c, "impl"), l.text, prev_label);
    }
    /* Records of the previous run not in this one: a subset run against a
     * full nightly leaves out hundreds, so one line says how many (naming
     * the first few) unless the caller asks for every one. */
    char first_removed[512] = "";
    json_t *removed_cases = json_object();
    for (size_t i = 0; i < json_array_size(prev_records); i++) {
        const json_t *p = json_array_get(prev_records, i);
        key_of(p, key, sizeof key);
        if (json_object_get(cur_keys, key))
            continue;
        if (o->list_removed)
            fprintf(out, "  %-10s  %s: was %s\n", "removed", key, summary_str(p, "verdict"));
        else if (n.removed < 3) {
            size_t used = strlen(first_removed);
            snprintf(first_removed + used, sizeof first_removed - used, "%s%s (was %s)", n.removed ? ", " : "", key,
                     summary_str(p, "verdict"));
        }
        if (removed_cases)
            json_object_set_new(removed_cases, summary_str(p, "case"), json_true());
        n.removed++;
    }
    if (n.removed && !o->list_removed)
        fprintf(out, "  %-10s  %d record(s) of %zu case(s) in %s are not in this run, compared only the %d in both: "
                     "%s%s\n",
                "removed", n.removed, removed_cases ? json_object_size(removed_cases) : 0, prev_label, n.common,
                first_removed, n.removed > 3 ? ", ... (--list-removed names every one)" : "");
    json_decref(removed_cases);
    const char *impl;
    json_t *list;
    json_object_foreach(sums, impl, list) {
        size_t count = json_array_size(list);
        double m = median_ratio(list);
        if (count < REGRESS_MIN_OVERHEAD_CASES) {
            fprintf(out, "  %-10s  %s: overhead median change %+.1f%% over %zu case(s): too few to judge\n", "overhead",
                    impl, 100.0 * (m - 1.0), count);
            continue;
        }
        int worse = m > 1.0 + o->overhead_ratio;
        n.regressions += worse;
        char text[160];
        snprintf(text, sizeof text, "overhead median change %+.1f%% over %zu case(s) (limit +%.0f%%)",
                 100.0 * (m - 1.0), count, 100.0 * o->overhead_ratio);
        fprintf(out, "  %-10s  %s: %s\n", worse ? "REGRESSION" : "overhead", impl, text);
        if (worse)
            list_regression(regressions, "*", impl, text, prev_label);
    }
    fprintf(out, "%d regression(s) against %s; %d record(s) in both, %d new, %d removed, %d improved, %d changed, %d noise\n",
            n.regressions, prev_label, n.common, n.added, n.removed, n.improvements, n.changed, n.noise);
done:
    json_decref(prev_by_key);
    json_decref(cur_keys);
    json_decref(sums);
    if (counts)
        *counts = n;
    return st;
}
