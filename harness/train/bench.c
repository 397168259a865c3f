#include "bench.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../impls/impl.h"
#include "aten/aten.h"
#include "aten/torch_runtime.h"
#include "blas_info.h"
#include "case.h"
#include "case_policy.h"
#include "error.h"
#include "fit.h"
#include "model.h"
#include "report.h"
#include "runner.h"

#define DEFAULT_REPEATS 5
#define QUICK_REPEATS 3
/* The targets (issue 5): overhead within 10% of one extra forward, the
 * prediction within 5%, activation peak growing like sqrt(L). */
#define OVERHEAD_TARGET 1.10
#define PREDICTION_TARGET 0.05
#define EXPONENT_LO 0.4
#define EXPONENT_HI 0.6
#define MAX_DEPTHS 16
/* Other work on the machine only ever slows a run down, and for seconds at
 * a time, longer than a run's few timed steps. A case is timed again (up to
 * MAX_ATTEMPTS in all, keeping the least disturbed attempt) when its
 * baselines disagree by more than BASELINE_SPREAD_LIMIT, when it misses the
 * overhead target, or when an impl looks faster than the baseline by more
 * than MIN_PLAUSIBLE_OVERHEAD allows: a checkpointed step does all of the
 * baseline's work and then recomputes, so that means the baselines were
 * slowed. A real slowdown of an impl misses on every attempt. */
#define BASELINE_SPREAD_LIMIT 1.10
#define MIN_PLAUSIBLE_OVERHEAD 0.97
#define MAX_ATTEMPTS 3
#define MAX_IMPLS CASE_MAX_IMPLS
/* Selective checkpointing (issue 18): at seq at or beyond the crossing the
 * model's prediction gives, attention_core holds less than this fraction of
 * the baseline's bytes at the end of forward. */
#define ATTENTION_CORE_HELD_TARGET 0.5
#define CROSSING_SEQ_MAX 65536

/* The default case files, in cases/bench/: CPU, and with --device cuda:N. */
static const char *const cpu_case_files[] = {"memory.ini", "selective.ini", NULL};
static const char *const gpu_case_files[] = {"gpu.ini", NULL};

void bench_usage(FILE *out)
{
    fprintf(out,
            "usage: ckpt-verify bench [-q|--quick] [--device DEV] [-o|--out DIR] [--cases PATH] [--repeats N] [--keep-h5]\n"
            "\n"
            "Memory and time benchmark of the checkpoint impls on the cases labelled `bench`\n"
            "(`bench_quick` with --quick) in cases/bench/memory.ini and selective.ini: time overhead\n"
            "against the recompute's ideal, bytes held at the end of forward against the model's\n"
            "prediction, how peak activation memory grows with depth at sqrt(L) segments, and what\n"
            "selective checkpointing's attention_core policy holds at long sequences. Exit 0 when\n"
            "every target holds, 1 when one does not. Draw it with `ckpt-verify plot DIR`.\n"
            "\n"
            "  -q, --quick    the small CI variant (a few seconds; the time target is not enforced)\n"
            "  --device DEV   run every case on DEV (cpu or cuda:N; CUDA builds); with cuda:N the\n"
            "                 cases labelled `bench_gpu` (`bench_gpu_quick`) in cases/bench/gpu.ini\n"
            "  -o, --out DIR  output directory (default: reports/bench-<UTC timestamp>)\n"
            "  --cases PATH   case file or directory (default: the files above, under %s/bench)\n"
            "  --repeats N    timed steps per run, median taken (default %d; %d with --quick)\n"
            "  --keep-h5      also write each case's HDF5 file (large for the full benchmark)\n",
            CKPT_CASES_DIR, DEFAULT_REPEATS, QUICK_REPEATS);
}

/* ---- evaluation --------------------------------------------------------- */

static int is_checkpoint_impl(const char *name)
{
    const struct checkpoint_impl *impl = impl_find(name);
    return impl && impl->run != impl_run_none;
}

static int good_verdict(enum verdict v) { return v == V_PASS || v == V_NOISE; }
/* Right gradients: the run did the case's work, so its bytes are a
 * measurement (MEMFAIL is about those bytes: the memory targets must see it). */
static int memory_verdict(enum verdict v) { return good_verdict(v) || v == V_MEMFAIL; }

double bench_impl_ideal(const struct case_result *c, const struct impl_result *x)
{
    if (!policy_impl_uses_policy(x->impl))
        return c->ideal_overhead;
    return (c->baseline_step_ms + x->recomputed_ops_ms) / c->baseline_step_ms;
}

static const char *segments_name(const struct ckpt_case *c, char *buf, size_t len)
{
    if (c->segments == 0)
        snprintf(buf, len, "every");
    else
        snprintf(buf, len, "%d", c->segments);
    return buf;
}

/* The impls of the results, in order of appearance. */
static int list_impls(const struct case_result *r, int n, const char **out)
{
    int k = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < r[i].n_results; j++) {
            const char *name = r[i].results[j].impl;
            int seen = 0;
            for (int m = 0; m < k; m++)
                seen |= strcmp(out[m], name) == 0;
            if (!seen && k < MAX_IMPLS && is_checkpoint_impl(name))
                out[k++] = name;
        }
    return k;
}

static const struct impl_result *result_of(const struct case_result *r, const char *impl)
{
    for (int j = 0; j < r->n_results; j++)
        if (strcmp(r->results[j].impl, impl) == 0)
            return &r->results[j];
    return NULL;
}

static double mib(double bytes) { return bytes / (1024.0 * 1024.0); }

/* The width of the case column: the longest name, at least 26. */
static int name_width(const struct case_result *r, int n)
{
    int w = 26;
    for (int i = 0; i < n; i++)
        if ((int)strlen(r[i].name) > w)
            w = (int)strlen(r[i].name);
    return w;
}

/* The largest overhead / ideal of a case's checkpoint impls (NAN: none timed). */
static double case_worst_ratio(const struct case_result *c)
{
    double worst = NAN;
    for (int j = 0; j < c->n_results; j++) {
        const struct impl_result *x = &c->results[j];
        if (!is_checkpoint_impl(x->impl) || !good_verdict(x->verdict) || isnan(x->overhead))
            continue;
        double ratio = x->overhead / bench_impl_ideal(c, x);
        if (!isnan(ratio) && (isnan(worst) || ratio > worst))
            worst = ratio;
    }
    return worst;
}

/* How far a case's timings are outside what an undisturbed machine gives
 * (0: not at all; see MAX_ATTEMPTS). */
static double disturbance(const struct case_result *c)
{
    double d = fmax(0, c->slowest_baseline_step_ms / c->baseline_step_ms - BASELINE_SPREAD_LIMIT);
    double worst = case_worst_ratio(c);
    if (!isnan(worst))
        d = fmax(d, worst - OVERHEAD_TARGET);
    for (int j = 0; j < c->n_results; j++) {
        const struct impl_result *x = &c->results[j];
        if (is_checkpoint_impl(x->impl) && good_verdict(x->verdict) && !isnan(x->overhead))
            d = fmax(d, MIN_PLAUSIBLE_OVERHEAD - x->overhead);
    }
    return isnan(d) ? 0 : d;
}

/* Overhead per case and impl against the ideal measured on the same case.
 * Returns the largest overhead / ideal (NAN when nothing was timed). */
static double report_overhead(FILE *out, const struct case_result *r, int n, const char **impls, int n_impls)
{
    double worst = NAN;
    fprintf(out, "\ntime overhead = step time / fastest baseline's (median over timed steps); ideal = (baseline step +\n"
                 "baseline forward) / baseline step, i.e. recomputing every layer once; ratio = overhead / ideal.\n"
                 "Selective impls (*): ideal = (baseline step + the baseline's forward time of the ops their\n"
                 "recompute reran) / baseline step, each op timed in the fastest baseline's own forward\n");
    int w = name_width(r, n);
    fprintf(out, "  %-*s %5s %5s %6s %9s %8s %6s", w, "case", "layers", "batch", "segs", "base ms", "fwd ms", "ideal");
    for (int k = 0; k < n_impls; k++)
        fprintf(out, "  %20s", impls[k]);
    fputc('\n', out);
    for (int i = 0; i < n; i++) {
        const struct case_result *c = &r[i];
        char seg[16];
        if (c->status && !c->n_results)
            continue;
        fprintf(out, "  %-*s %5d %5d %6s %9.1f %8.1f %6.3f", w, c->name, c->definition.layers, c->definition.batch,
                segments_name(&c->definition, seg, sizeof seg), c->baseline_step_ms, c->baseline_forward_ms,
                c->ideal_overhead);
        for (int k = 0; k < n_impls; k++) {
            const struct impl_result *x = result_of(c, impls[k]);
            if (!x || isnan(x->overhead) || !good_verdict(x->verdict)) {
                fprintf(out, "  %20s", "-");
                continue;
            }
            double ideal = bench_impl_ideal(c, x), ratio = x->overhead / ideal;
            if (isnan(ideal)) { /* a selective run whose ops have no times (a mark failed) */
                fprintf(out, "  %6.3fx (ideal unknown)", x->overhead);
                continue;
            }
            if (ideal != c->ideal_overhead)
                fprintf(out, "  %6.3fx (*%4.2f %5.3f)", x->overhead, ideal, ratio);
            else
                fprintf(out, "  %6.3fx (ratio %5.3f)", x->overhead, ratio);
            if (isnan(worst) || ratio > worst)
                worst = ratio;
        }
        fputc('\n', out);
    }
    return worst;
}

static double rel_error(double measured, double predicted)
{
    return predicted > 0 && !isnan(measured) ? (measured - predicted) / predicted : NAN;
}

/* Bytes held at the end of forward against the prediction. Returns the
 * largest |error| (NAN when nothing was measured). */
static double report_prediction(FILE *out, const struct case_result *r, int n, const char **impls, int n_impls)
{
    double worst = NAN;
    fprintf(out, "\nbytes held at the end of forward (live above the step's start): measured / predicted by\n"
                 "model_predict_saved_bytes (MiB), error = measured / predicted - 1\n");
    int w = name_width(r, n);
    fprintf(out, "  %-*s %26s", w, "case", "baseline");
    for (int k = 0; k < n_impls; k++)
        fprintf(out, "  %26s", impls[k]);
    fputc('\n', out);
    for (int i = 0; i < n; i++) {
        const struct case_result *c = &r[i];
        if (c->status && !c->n_results)
            continue;
        double e = rel_error(c->baseline_end_forward_bytes, c->predicted_baseline_end_forward_bytes);
        fprintf(out, "  %-*s %8.3f / %8.3f %+6.2f%%", w, c->name, mib(c->baseline_end_forward_bytes),
                mib(c->predicted_baseline_end_forward_bytes), 100 * e);
        if (!isnan(e) && (isnan(worst) || fabs(e) > worst))
            worst = fabs(e);
        for (int k = 0; k < n_impls; k++) {
            const struct impl_result *x = result_of(c, impls[k]);
            if (!x || !memory_verdict(x->verdict)) {
                fprintf(out, "  %26s", "-");
                continue;
            }
            e = rel_error(x->end_forward_bytes, x->predicted_end_forward_bytes);
            fprintf(out, "  %8.3f / %8.3f %+6.2f%%", mib(x->end_forward_bytes), mib(x->predicted_end_forward_bytes),
                    100 * e);
            if (!isnan(e) && (isnan(worst) || fabs(e) > worst))
                worst = fabs(e);
        }
        fputc('\n', out);
    }
    return worst;
}

/* Same case but for depth: what the sqrt(L) fit compares. */
static int same_but_depth(const struct ckpt_case *a, const struct ckpt_case *b)
{
    return a->model == b->model && a->hidden == b->hidden && a->seq == b->seq && a->batch == b->batch &&
           a->heads == b->heads && a->dtype == b->dtype && a->fusion == b->fusion && a->autocast == b->autocast &&
           a->dropout == b->dropout;
}

static int sqrt_segments(const struct ckpt_case *c)
{
    long r = lround(sqrt((double)c->layers));
    return c->segments > 0 && c->segments == (r < 1 ? 1 : r);
}

/* The peak is counted above the step's start, so parameters are already
 * out; this takes out the gradients (linear in L whatever the
 * checkpointing) as held after backward. */
static double peak_minus_gradients(double peak, double grads) { return peak - grads; }

/* The depth series at segments = sqrt(L): per impl the fitted exponent of
 * the activation peak (runner.c activation_probe). Returns 1 when every impl's exponent is
 * within the target (0 when one is not, -1 when the run has no such
 * series). */
static int report_depth(FILE *out, const struct case_result *r, int n, const char **impls, int n_impls)
{
    const struct case_result *series[MAX_DEPTHS];
    int m = 0;
    /* The longest series: the cases at sqrt(L) that differ only in depth. */
    for (int a = 0; a < n; a++) {
        const struct case_result *cand[MAX_DEPTHS];
        int c = 0;
        for (int i = 0; i < n && c < MAX_DEPTHS; i++) {
            if ((r[i].status && !r[i].n_results) || !sqrt_segments(&r[i].definition) ||
                !same_but_depth(&r[a].definition, &r[i].definition))
                continue;
            int dup = 0;
            for (int k = 0; k < c; k++)
                dup |= cand[k]->definition.layers == r[i].definition.layers;
            if (!dup)
                cand[c++] = &r[i];
        }
        if (c > m) {
            m = c;
            memcpy(series, cand, sizeof(cand[0]) * (size_t)c);
        }
    }
    for (int i = 1; i < m; i++) /* by depth */
        for (int j = i; j > 0 && series[j - 1]->definition.layers > series[j]->definition.layers; j--) {
            const struct case_result *t = series[j];
            series[j] = series[j - 1];
            series[j - 1] = t;
        }
    if (m < 2) {
        fprintf(out, "\nno depth series at segments = sqrt(L) in these cases: exponent not measured\n");
        return -1;
    }
    fprintf(out, "\npeak memory vs depth at segments = sqrt(L), MiB. \"peak\": the highest bytes live during\n"
                 "forward + backward above what was live when the step began, so parameters, input and target\n"
                 "(allocated before) are not in it; the gradients are, and they grow like L whatever the\n"
                 "checkpointing. Two ways to take them out:\n"
                 "  pk-grad:  peak - all gradients (held after backward). Biased low: at the moment of a\n"
                 "            checkpointed run's peak (late in backward) the gradients of the layers not yet\n"
                 "            done do not exist, and that part grows like sqrt(L) too.\n"
                 "  act peak: the highest (live - gradients held at that moment), sampled at every op of\n"
                 "            forward and of each recompute, and forward's exact peak. The exponent target\n"
                 "            is on this one.\n");
    fprintf(out, "  %6s %4s %9s %9s %9s", "layers", "segs", "grads", "base peak", "base act");
    for (int k = 0; k < n_impls; k++)
        fprintf(out, " | %-12s %8s %8s %8s %8s", impls[k], "peak", "pk-grad", "act peak", "end fwd");
    fprintf(out, " | %9s\n", "predicted");
    double L[MAX_DEPTHS], base_act[MAX_DEPTHS], pkg[MAX_IMPLS][MAX_DEPTHS], act[MAX_IMPLS][MAX_DEPTHS],
        efb[MAX_IMPLS][MAX_DEPTHS], pred[MAX_DEPTHS];
    for (int d = 0; d < m; d++) {
        const struct case_result *c = series[d];
        L[d] = c->definition.layers;
        base_act[d] = c->baseline_activation_peak_bytes;
        pred[d] = c->predicted_checkpointed_end_forward_bytes;
        fprintf(out, "  %6d %4d %9.3f %9.3f %9.3f", c->definition.layers, c->definition.segments,
                mib(c->baseline_grad_bytes), mib(c->baseline_peak_bytes), mib(base_act[d]));
        for (int k = 0; k < n_impls; k++) {
            const struct impl_result *x = result_of(c, impls[k]);
            int ok = x && good_verdict(x->verdict);
            pkg[k][d] = ok ? peak_minus_gradients(x->peak_bytes, x->grad_bytes) : NAN;
            act[k][d] = ok ? x->activation_peak_bytes : NAN;
            efb[k][d] = ok ? x->end_forward_bytes : NAN;
            fprintf(out, " | %-12s %8.3f %8.3f %8.3f %8.3f", "", x ? mib(x->peak_bytes) : NAN, mib(pkg[k][d]),
                    mib(act[k][d]), mib(efb[k][d]));
        }
        fprintf(out, " | %9.3f\n", mib(pred[d]));
    }
    int ok = 1;
    fprintf(out, "  fitted exponent k (bytes ~ L^k, least squares of log bytes on log L over %d depths):\n", m);
    fprintf(out, "    baseline activation peak: k = %.3f (no checkpoint: ~1)\n", fit_loglog_slope(L, base_act, m));
    fprintf(out, "    predicted end of forward: k = %.3f\n", fit_loglog_slope(L, pred, m));
    for (int k = 0; k < n_impls; k++) {
        int measured = 0;
        for (int d = 0; d < m; d++)
            measured |= !isnan(act[k][d]);
        if (!measured) /* an impl the depth series does not run (selective's own cases) */
            continue;
        double ka = fit_loglog_slope(L, act[k], m);
        int met = ka >= EXPONENT_LO && ka <= EXPONENT_HI;
        ok &= met;
        fprintf(out, "    %-13s activation peak: k = %.3f [target %.1f..%.1f: %s]; peak - gradients: k = %.3f; "
                     "end of forward: k = %.3f\n",
                impls[k], ka, EXPONENT_LO, EXPONENT_HI, met ? "met" : "MISSED", fit_loglog_slope(L, pkg[k], m),
                fit_loglog_slope(L, efb[k], m));
    }
    return ok;
}

/* ---- selective checkpointing ----------------------------------------------- */

int bench_attention_core_crossing(const struct ckpt_case *c)
{
    if (c->model != MODEL_GPT_BLOCK)
        return -1;
    struct ckpt_case k = *c;
    snprintf(k.policy, sizeof k.policy, "attention_core");
    unsigned keep = policy_of_case(&k);
    struct model m;
    if (model_create(&m, &k, DEVICE_CPU)) {
        error_clear();
        return -1;
    }
    struct segment_plan none, plan;
    segment_plan_make(&none, m.layers, SEGMENTS_NONE);
    segment_plan_make(&plan, m.layers, c->segments);
    int found = 0;
    /* attention_core's bytes grow like seq, the baseline's like seq^2 (the
     * attention probabilities): the first seq below the fraction is where
     * it stays below. */
    for (int seq = 1; seq <= CROSSING_SEQ_MAX && !found; seq++) {
        m.seq = seq;
        if ((double)model_predict_saved_bytes_keeping(&m, &plan, keep) <
            ATTENTION_CORE_HELD_TARGET * (double)model_predict_saved_bytes(&m, &none))
            found = seq;
    }
    model_free(&m);
    return found;
}

/* Korthikanti et al. (2022) per transformer layer, in 16-bit:
 * s·b·h·(34 + 5·a·s/h) bytes, or 34·s·b·h with the attention core
 * recomputed; scaled here to the case's activation dtype, for all layers. */
static double korthikanti_bytes(const struct ckpt_case *c, int attention_core)
{
    double s = c->seq, b = c->batch, h = c->hidden, a = c->heads;
    double width = c->autocast != AUTOCAST_OFF ? 2.0 : (double)dtype_size((enum dtype)c->dtype);
    return c->layers * s * b * h * (34.0 + (attention_core ? 0.0 : 5.0 * a * s / h)) * width / 2.0;
}

static const struct impl_result *full_recompute_of(const struct case_result *c)
{
    const struct impl_result *x = result_of(c, "nonreentrant");
    if (!x || !memory_verdict(x->verdict))
        x = result_of(c, "reentrant");
    return x && memory_verdict(x->verdict) ? x : NULL;
}

/* Per case with a policy: bytes held at the end of forward by the baseline,
 * full recompute and each selective run, measured and predicted, with
 * Korthikanti's figure beside; then the attention_core target. Returns 1
 * when every attention_core run at seq >= its crossing holds less than
 * ATTENTION_CORE_HELD_TARGET of the baseline, 0 when one does not, -1 when
 * no such run was made. */
static int report_selective(FILE *out, const struct case_result *r, int n)
{
    int shown = 0, checked = 0, ok = 1;
    for (int i = 0; i < n; i++) {
        const struct case_result *c = &r[i];
        const struct ckpt_case *d = &c->definition;
        if (!d->policy[0] || (c->status && !c->n_results))
            continue;
        if (!shown++)
            fprintf(out, "\nselective checkpointing: bytes held at the end of forward (MiB), measured / predicted;\n"
                         "held = selective / baseline; Korthikanti = L*s*b*h*(34 + 5*a*s/h) for the baseline and\n"
                         "L*34*s*b*h for attention_core (ac) (their 16-bit formula at this dtype; docs/memory.md names\n"
                         "the terms that differ); cross = the seq from which our prediction has attention_core below\n"
                         "%.0f%% of the baseline (the target applies there)\n"
                         "  %-38s %-14s %5s %5s %19s %8s %-13s %19s %6s %19s %5s\n",
                    100 * ATTENTION_CORE_HELD_TARGET, "case", "policy", "seq", "batch", "baseline", "full",
                    "impl", "selective", "held", "Korthikanti base/ac", "cross");
        int attention_core = strcmp(d->policy, "attention_core") == 0;
        int crossing = attention_core ? bench_attention_core_crossing(d) : -1;
        const struct impl_result *full = full_recompute_of(c);
        for (int j = 0; j < c->n_results; j++) {
            const struct impl_result *x = &c->results[j];
            if (!policy_impl_uses_policy(x->impl) || !memory_verdict(x->verdict))
                continue;
            double held = x->end_forward_bytes / c->baseline_end_forward_bytes;
            char cross[16] = "-";
            const char *mark = "";
            if (crossing > 0) {
                snprintf(cross, sizeof cross, "%d", crossing);
                if (d->seq >= crossing) {
                    int met = held < ATTENTION_CORE_HELD_TARGET;
                    checked++;
                    ok &= met;
                    mark = met ? " < target: met" : " >= target: MISSED";
                }
            }
            char korth[48];
            snprintf(korth, sizeof korth, "%8.3f / %8.3f", mib(korthikanti_bytes(d, 0)), mib(korthikanti_bytes(d, 1)));
            fprintf(out, "  %-38s %-14s %5d %5d %8.3f / %8.3f %8.3f %-13s %8.3f / %8.3f %5.1f%% %19s %5s%s\n",
                    c->name, d->policy, d->seq, d->batch, mib(c->baseline_end_forward_bytes),
                    mib(c->predicted_baseline_end_forward_bytes), full ? mib(full->end_forward_bytes) : NAN, x->impl,
                    mib(x->end_forward_bytes), mib(x->predicted_end_forward_bytes), 100 * held, korth, cross, mark);
        }
    }
    /* The crossing per shape, ours beside Korthikanti's. */
    int seen[64][2], n_seen = 0;
    for (int i = 0; i < n; i++) {
        const struct ckpt_case *d = &r[i].definition;
        if (strcmp(d->policy, "attention_core") != 0 || n_seen == 64)
            continue;
        int dup = 0;
        for (int k = 0; k < n_seen; k++)
            dup |= seen[k][0] == d->hidden && seen[k][1] == d->heads;
        if (dup)
            continue;
        seen[n_seen][0] = d->hidden;
        seen[n_seen++][1] = d->heads;
        int crossing = bench_attention_core_crossing(d);
        double per_head = (double)d->hidden / d->heads;
        fprintf(out, "  hidden %d, %d heads (h/a = %g): attention_core holds < %.0f%% of the baseline at seq >= %d "
                     "(%.2f h/a) by our prediction; Korthikanti's layer at seq > 6.8 h/a = %.1f\n",
                d->hidden, d->heads, per_head, 100 * ATTENTION_CORE_HELD_TARGET, crossing, crossing / per_head,
                6.8 * per_head);
    }
    (void)checked;
    return checked ? ok : -1;
}

/* ---- running ------------------------------------------------------------ */

/* The cases to run: --cases PATH, else the default files for the device. */
static int load_cases(const struct bench_options *o, int gpu, struct case_list *cases, char *what, size_t len)
{
    if (o->cases_path) {
        snprintf(what, len, "%s", o->cases_path);
        return case_list_load(cases, o->cases_path);
    }
    const char *const *files = gpu ? gpu_case_files : cpu_case_files;
    size_t used = (size_t)snprintf(what, len, "%s/bench/", CKPT_CASES_DIR);
    for (int i = 0; files[i]; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/bench/%s", CKPT_CASES_DIR, files[i]);
        int st = case_list_load_file(cases, path);
        if (st)
            return st;
        if (used < len)
            used += (size_t)snprintf(what + used, len - used, "%s%s", i ? "," : "", files[i]);
    }
    return ST_OK;
}

int bench_run(const struct bench_options *o, FILE *out, int *targets_met)
{
    int device = DEVICE_CPU;
    if (o->device && aten_parse_device(o->device, &device))
        return error_wrap(ST_INPUT, "bench --device");
    int gpu = device != DEVICE_CPU;
    char path[1024];
    const char *label = gpu ? (o->quick ? "bench_gpu_quick" : "bench_gpu") : o->quick ? "bench_quick" : "bench";
    int repeats = o->repeats ? o->repeats : o->quick ? QUICK_REPEATS : DEFAULT_REPEATS;
    struct case_list cases = {0};
    struct summary_torch torch = {aten_libtorch_version(), torch_compiled_cuda(), torch_pinned_version()};
    struct summary *summary = NULL;
    struct case_result *results = NULL, *again = NULL;
    *targets_met = 0;
    int st = load_cases(o, gpu, &cases, path, sizeof path);
    if (st)
        goto out;
    int n = 0;
    for (int i = 0; i < cases.count; i++)
        n += case_has_label(&cases.items[i], label);
    if (!n) {
        st = error_set(ST_INPUT, "bench: no case is labelled '%s' in %s", label, path);
        goto out;
    }
    if (!(results = calloc((size_t)n, sizeof *results))) {
        st = error_set(ST_RUN, "bench: out of memory for %d results", n);
        goto out;
    }
    if ((st = summary_create(&summary, CKPT_GIT_REV, CKPT_VERSION, &torch)))
        goto out;
    struct run_settings settings = {.out_dir = o->out_dir, .git_rev = CKPT_GIT_REV,
                                    .harness_version = CKPT_VERSION, .repeats = repeats, .skip_h5 = !o->keep_h5};
    fprintf(out, "ckpt-verify bench%s: %d case(s) labelled %s from %s, %d timed steps per run (median)%s%s\n",
            o->quick ? " --quick" : "", n, label, path, repeats, o->device ? ", on " : "", o->device ? o->device : "");
    struct blas_info blas;
    blas_info_detect(&blas);
    fprintf(out, "BLAS %s: %s\n", blas.name, blas.path);
    int unexpected = 0, k = 0;
    for (int i = 0; i < cases.count; i++) {
        if (!case_has_label(&cases.items[i], label))
            continue;
        struct case_result *res = &results[k++];
        /* --device moves the case, as the main command's --device does. */
        if (o->device)
            snprintf(cases.items[i].device, sizeof cases.items[i].device, "%s", o->device);
        if ((st = model_check_devices(&cases.items[i])))
            goto out;
        st = runner_run_case(&cases.items[i], &settings, res);
        if (st == ST_INPUT)
            goto out;
        for (int attempt = 2; !st && !o->quick && attempt <= MAX_ATTEMPTS && disturbance(res) > 0; attempt++) {
            fprintf(out, "case %s: timing disturbed (baselines %.1f..%.1f ms, worst overhead / ideal %.3f): "
                         "timing it again, attempt %d of %d\n",
                    res->name, res->baseline_step_ms, res->slowest_baseline_step_ms, case_worst_ratio(res), attempt,
                    MAX_ATTEMPTS);
            if (!again && !(again = calloc(1, sizeof *again))) {
                st = error_set(ST_RUN, "bench: out of memory");
                goto out;
            }
            case_result_free(again); /* an earlier attempt's, not kept */
            int st2 = runner_run_case(&cases.items[i], &settings, again);
            if (st2 == ST_INPUT) {
                st = st2;
                goto out;
            }
            int keep = !st2 && disturbance(again) < disturbance(res);
            fprintf(out, "  attempt %d: baselines %.1f..%.1f ms, worst overhead / ideal %.3f: %s\n", attempt,
                    again->baseline_step_ms, again->slowest_baseline_step_ms, case_worst_ratio(again),
                    keep ? "kept" : "the earlier attempt stays");
            if (keep) {
                /* res takes again's texts: again is left empty, not freed twice. */
                case_result_free(res);
                *res = *again;
                memset(again, 0, sizeof *again);
            }
        }
        report_print_case(out, res);
        fflush(out);
        if ((st = summary_add_case(summary, res)))
            goto out;
        unexpected += res->status && !res->n_results;
        for (int j = 0; j < res->n_results; j++)
            unexpected += !res->results[j].expected;
    }
    if ((st = summary_write(summary, o->out_dir)))
        goto out;

    const char *impls[MAX_IMPLS];
    int n_impls = list_impls(results, n, impls);
    double worst_overhead = report_overhead(out, results, n, impls, n_impls);
    double worst_error = report_prediction(out, results, n, impls, n_impls);
    int depth = report_depth(out, results, n, impls, n_impls);
    int selective = report_selective(out, results, n);

    int overhead_met = !isnan(worst_overhead) && worst_overhead <= OVERHEAD_TARGET;
    int prediction_met = !isnan(worst_error) && worst_error <= PREDICTION_TARGET;
    fprintf(out, "\ntargets:\n");
    fprintf(out, "  time overhead <= %.2f x (baseline + one forward, or selective's recomputed ops) / baseline: worst "
                 "ratio %.3f -> %s%s\n",
            OVERHEAD_TARGET, worst_overhead, overhead_met ? "met" : "MISSED",
            o->quick ? " (not enforced with --quick: millisecond steps time the machine's noise)" : "");
    fprintf(out, "  bytes held at end of forward within %.0f%% of the prediction: worst |error| %.2f%% -> %s\n",
            100 * PREDICTION_TARGET, 100 * worst_error, prediction_met ? "met" : "MISSED");
    fprintf(out, "  activation peak at segments = sqrt(L) grows like L^k, %.1f <= k <= %.1f -> %s\n", EXPONENT_LO,
            EXPONENT_HI, depth > 0 ? "met" : depth == 0 ? "MISSED" : "not measured");
    fprintf(out, "  attention_core holds < %.0f%% of the baseline's bytes at the end of forward at seq >= the crossing "
                 "-> %s\n",
            100 * ATTENTION_CORE_HELD_TARGET, selective > 0 ? "met" : selective == 0 ? "MISSED" : "not measured");
    if (unexpected)
        fprintf(out, "  %d unexpected verdict(s): see NO above\n", unexpected);
    fprintf(out, "summary: %s/summary.json; plots: ckpt-verify plot %s\n", o->out_dir, o->out_dir);
    *targets_met = (overhead_met || o->quick) && prediction_met && depth != 0 && selective != 0 && !unexpected;
    st = ST_OK;
out:
    if (again)
        case_result_free(again);
    free(again);
    for (int j = 0; results && j < n; j++)
        case_result_free(&results[j]);
    free(results);
    summary_free(summary);
    case_list_free(&cases);
    return st;
}
