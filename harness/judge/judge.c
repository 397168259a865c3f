#include "judge.h"

#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compare.h"
#include "envelope.h"
#include "judge_internal.h"
#include "recomputed_ops.h"
#include "error.h"
#include "h5store.h"
#include "codegen_rounding.h"
#include "compile_evidence.h"
#include "held_check.h"
#include "user_memory.h"
#include "policy_statement.h"
#include "run_checks.h"
#include "run_tensors.h"
#include "xla_evidence.h"

/* Length of the family of "<family>_<k>" when the family is "baseline" or
 * ends in "_baseline"; 0 otherwise. */
size_t judge_baseline_family_len(const char *run)
{
    const char *us = strrchr(run, '_');
    if (!us || !us[1])
        return 0;
    for (const char *p = us + 1; *p; p++)
        if (!isdigit((unsigned char)*p))
            return 0;
    size_t n = (size_t)(us - run);
    if (n < 8 || strncmp(us - 8, "baseline", 8) != 0 || (n > 8 && us[-9] != '_'))
        return 0;
    return n;
}

int judge_is_baseline(const char *run) { return judge_baseline_family_len(run) > 0; }

int judge_is_baseline_of(const char *run, const char *family)
{
    size_t n = judge_baseline_family_len(run);
    return n && n == strlen(family) && strncmp(run, family, n) == 0;
}

int judge_is_rerun_of(const char *run, const char *of)
{
    size_t n = strlen(of);
    if (strncmp(run, of, n) != 0 || strncmp(run + n, "_rerun_", 7) != 0 || !run[n + 7])
        return 0;
    for (const char *p = run + n + 7; *p; p++)
        if (!isdigit((unsigned char)*p))
            return 0;
    return 1;
}

int judge_is_rerun(const char *run)
{
    const char *at = strstr(run, "_rerun_");
    if (!at || at == run)
        return 0;
    char of[64];
    snprintf(of, sizeof of, "%.*s", (int)(at - run), run);
    return judge_is_rerun_of(run, of);
}

const struct run_record *judge_find_run(const struct run_record *runs, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(runs[i].name, name) == 0)
            return &runs[i];
    return NULL;
}

/* "12.5", "3.2e+06" or "inf": distances in scaled ULP (at the tensor's scale). */
static const char *scaled_format(double v, char *buf, size_t len)
{
    if (isinf(v) || isnan(v))
        snprintf(buf, len, "inf");
    else
        snprintf(buf, len, "%.3g", v);
    return buf;
}

static void describe_tensor(const struct run_record *base, const char *path, const struct tensor_diff *d, char *buf,
                            size_t len)
{
    char index[96] = "";
    const struct run_tensor *t = run_record_find(base, path);
    if (t && d->comparable)
        host_tensor_index_str(&t->t, d->first_index, index, sizeof index);
    if (d->comparable && d->integer) /* counts: whole values, never rounded to 9 digits */
        snprintf(buf, len, "%s %s (%.0f vs %.0f; %zu of %zu elements differ)", path, index, d->first_a, d->first_b,
                 d->n_differ, d->count);
    else if (d->comparable)
        snprintf(buf, len, "%s %s (%.9g vs %.9g; %zu of %zu elements differ)", path, index, d->first_a, d->first_b,
                 d->n_differ, d->count);
    else
        snprintf(buf, len, "%s: %s", path, d->why);
}

/* A tensor's place and what differs there (describe_tensor): its path
 * (RUN_PATH_MAX), index and two values or a compare.h why; bounded by
 * construction. */
#define TENSOR_WHERE_MAX 1024
/* What the judge's own checks write (run_checks, held_check,
 * policy_statement, the case's memory requirements): figures and names
 * from the harness's case (each within its case.h limit), bounded by
 * construction; whatever comes from a run's texts goes through struct text. */
#define FIGURES_MAX 8192

/* ---- one run ------------------------------------------------------------- */

/* The verdicts expected of run `name` (its record `run`, or NULL for a run
 * the report lacks: then its role is unknown). */
static unsigned expected_mask_of(const struct ckpt_case *c, const char *name, const struct run_record *run)
{
    for (int i = 0; i < c->n_expect; i++)
        if (strcmp(c->expect[i].impl, name) == 0)
            return c->expect[i].verdict_mask;
    /* A run is a checkpoint that claims to be right unless its producer
     * recorded it as a planted bug (run_record.h role: the harness's
     * faulty impls, a plugin's). */
    if (!run || strcmp(run->role, RUN_ROLE_PLANTED_BUG) != 0)
        return (1u << V_PASS) | (1u << V_NOISE);
    /* NOT_OBSERVABLE: the bug's own rule says it cannot show here and the
     * run matched; not a miss. */
    return (1u << V_FAIL) | (1u << V_MEMFAIL) | (1u << V_NOT_OBSERVABLE);
}

static unsigned expected_mask(const struct ckpt_case *c, const struct run_record *run)
{
    return expected_mask_of(c, run->name, run);
}

/* A planted bug that its own rule says cannot show in this case, and that
 * indeed matched the baseline (PASS, or NOISE: within the kernels' own
 * spread), is NOT_OBSERVABLE rather than a PASS that reads as "missed". If
 * it differed anyway, the verdict stands and the reason says the rule was
 * wrong. */
static void apply_observability(const struct run_record *run, struct impl_result *res)
{
    const char *why = text_str(&run->not_observable);
    if (strcmp(run->role, RUN_ROLE_PLANTED_BUG) != 0 || !why[0])
        return;
    if (res->verdict == V_PASS || res->verdict == V_NOISE) {
        res->verdict = V_NOT_OBSERVABLE;
        text_prependf(&res->reason, "planted bug cannot show here (%s); the run matched: ", why);
    } else if (res->verdict == V_FAIL) {
        text_appendf(&res->reason, " [its rule said it could not show here: %s]", why);
    }
}

static double step_ms(const struct run_record *r) { return run_record_attr(r, "timing.step_ms"); }

/* The first run of a process may pay for warm-up; the fastest baseline is
 * the fair reference for overhead. */
static const struct run_record *fastest_baseline(const struct run_record *runs, int n, const char *family)
{
    const struct run_record *best = NULL;
    for (int i = 0; i < n; i++)
        if (judge_is_baseline_of(runs[i].name, family) && (!best || step_ms(&runs[i]) < step_ms(best)))
            best = &runs[i];
    return best;
}

/* Whether a run's steps were timed under python/ckpt_verify's memory map
 * (timing.mapped = 1): its dispatch mode costs every op a Python call. */
static int mapped(const struct run_record *r) { return run_record_attr(r, "timing.mapped") == 1; }

/* A baseline timed as `run` was (mapped or not), so that an overhead is
 * never the map's cost; any baseline when none was. */
static int timed_alike(const struct run_record *runs, int n, const char *family, const struct run_record *run,
                       const struct run_record *b)
{
    for (int i = 0; i < n; i++)
        if (judge_is_baseline_of(runs[i].name, family) && mapped(&runs[i]) == mapped(run))
            return mapped(b) == mapped(run);
    return 1;
}

static const struct run_record *fastest_baseline_like(const struct run_record *runs, int n, const char *family,
                                                      const struct run_record *run)
{
    const struct run_record *best = NULL;
    for (int i = 0; i < n; i++)
        if (judge_is_baseline_of(runs[i].name, family) && timed_alike(runs, n, family, run, &runs[i]) &&
            (!best || step_ms(&runs[i]) < step_ms(best)))
            best = &runs[i];
    return best;
}

/* A user's run's memory figures (judge.h), from its statement's attributes. */
static void user_figures(const struct run_record *run, struct impl_result *res)
{
    res->stated_end_forward_bytes = run_record_attr(run, "memory.stated_end_forward_bytes");
    res->judged_held_bytes = run_record_attr(run, "memory.judged_held_bytes");
    if (isnan(res->judged_held_bytes) && !isnan(res->stated_end_forward_bytes))
        res->judged_held_bytes = run_record_attr(run, "memory.end_forward_bytes");
    double step = run_record_attr(run, "memory.judged_step"), ops = run_record_attr(run, "memory.recomputed_ops");
    res->memory_step = isnan(step) ? (isnan(res->stated_end_forward_bytes) ? -1 : 1) : (int)step;
    res->memory_recomputed_ops = isnan(ops) ? -1 : (int)ops;
    text_set(&res->memory_extra, text_str(&run->memory_extra));
    text_set(&res->memory_state, text_str(&run->memory_state));
    text_set(&res->memory_statement, text_str(&run->memory_statement));
    if (run_record_attr(run, "memory.control") == 1)
        text_set(&res->memory_judged, "control");
    else if (!isnan(res->stated_end_forward_bytes))
        text_set(&res->memory_judged, "judged");
    else if (strncmp(text_str(&run->memory_statement), USER_MEMORY_NOT_JUDGED, strlen(USER_MEMORY_NOT_JUDGED)) == 0)
        text_set(&res->memory_judged, text_str(&run->memory_statement));
}

static void run_figures(const struct run_record *runs, int n, const char *family, const struct run_record *base,
                        const struct run_record *run, struct impl_result *res)
{
    res->peak_bytes = run_record_attr(run, "memory.peak_bytes");
    res->end_forward_bytes = run_record_attr(run, "memory.end_forward_bytes");
    res->forward_peak_bytes = run_record_attr(run, "memory.forward_peak_bytes");
    res->backward_peak_bytes = run_record_attr(run, "memory.backward_peak_bytes");
    res->grad_bytes = run_record_attr(run, "memory.grad_bytes");
    res->activation_peak_bytes = run_record_attr(run, "memory.activation_peak_bytes");
    res->predicted_end_forward_bytes = run_record_attr(run, "memory.predicted_end_forward_bytes");
    res->forward_ms = run_record_attr(run, "timing.forward_ms");
    res->backward_ms = run_record_attr(run, "timing.backward_ms");
    res->recompute_ms = run_record_attr(run, "timing.recompute_ms");
    res->step_ms = step_ms(run);
    double count = run_record_attr(run, "recompute.count");
    res->recomputes = isnan(count) ? 0 : (int)count;
    user_figures(run, res);
    double base_peak = run_record_attr(base, "memory.peak_bytes");
    double base_held = run_record_attr(base, "memory.end_forward_bytes");
    res->memory_saved = base_peak > 0 && !isnan(res->peak_bytes) ? 1.0 - res->peak_bytes / base_peak : NAN;
    res->end_forward_saved =
        base_held > 0 && !isnan(res->end_forward_bytes) ? 1.0 - res->end_forward_bytes / base_held : NAN;
    const struct run_record *fastest = fastest_baseline_like(runs, n, family, run);
    res->overhead = fastest ? res->step_ms / step_ms(fastest) : NAN;
    res->baseline_step_ms = fastest ? step_ms(fastest) : NAN;
    snprintf(res->overhead_baseline, sizeof res->overhead_baseline, "%s", fastest ? fastest->name : "");
    res->baseline_peak_bytes = base_peak;
    res->baseline_end_forward_bytes = base_held;
    res->recomputed_ops_ms = fastest ? recomputed_ops_ms(fastest, run) : NAN;
    /* The baselines do the same work: when their step times spread wider
     * than this, the machine (or sub-millisecond steps) moved the timings
     * more than a checkpoint's overhead would, and the ratio is marked. */
    double slowest = 0;
    for (int i = 0; i < n; i++)
        if (judge_is_baseline_of(runs[i].name, family) && timed_alike(runs, n, family, run, &runs[i]) &&
            step_ms(&runs[i]) > slowest)
            slowest = step_ms(&runs[i]);
    res->timing_stable = fastest && slowest <= JUDGE_STABLE_TIMING_SPREAD * step_ms(fastest);
    if (fastest && !res->timing_stable)
        snprintf(res->timing_note, sizeof res->timing_note, "the baselines' step times spread %.2fx",
                 slowest / step_ms(fastest));
    /* The run's own steps must agree as well: its median is its figure. */
    double own_fast = run_record_attr(run, "timing.fastest_step_ms");
    double own_slow = run_record_attr(run, "timing.slowest_step_ms");
    if (own_fast > 0 && own_slow > JUDGE_MEANINGLESS_TIMING_SPREAD * own_fast) {
        res->overhead = NAN;
        res->timing_stable = 0;
        res->overhead_withheld = 1;
        snprintf(res->timing_note, sizeof res->timing_note,
                 "the run's own steps took %.3g to %.3g ms (%.0fx): a one-time cost inside a step (a library's first "
                 "call) decides its median, not the checkpoint",
                 own_fast, own_slow, own_slow / own_fast);
        return;
    }
    if (res->timing_stable && own_fast > 0 && own_slow > JUDGE_STABLE_TIMING_SPREAD * own_fast) {
        res->timing_stable = 0;
        snprintf(res->timing_note, sizeof res->timing_note, "the run's own step times spread %.2fx",
                 own_slow / own_fast);
    }
    /* A checkpoint does the baseline's work and more: a ratio below 1 is
     * the machine's noise (or a baseline that paid for a warm-up), never a
     * speed-up, and is marked like an unsteady one. */
    if (res->timing_stable && res->overhead < 1.0) {
        res->timing_stable = 0;
        snprintf(res->timing_note, sizeof res->timing_note,
                 "below 1: a checkpointed step cannot be faster than its baseline's");
    }
}

/* ---- the attempts: the run and its re-runs ---------------------------------- */

/* One attempt of the judged run (the run itself or a completed re-run)
 * against baseline_0 and every tensor's envelope. */
struct attempt {
    const struct run_record *run;
    struct run_diff d;         /* against baseline_0 */
    struct envelope_check env; /* where d diverges and nothing is missing */
    int broken;                /* a tensor on one side only, or of another dtype or shape */
    int outside;               /* broken, or some tensor outside its envelope */
    double badness;            /* how far out: inf when broken, else its max scaled ULP */
};

static int judge_attempt(const struct spread_table *tab, const struct run_record *const *samples, int n_samples,
                         const struct run_record *run, struct attempt *a)
{
    memset(a, 0, sizeof *a);
    a->run = run;
    int st = compare_runs(tab->baselines[0], run, NULL, &a->d);
    if (st)
        return st;
    if (a->d.n_missing || a->d.incomparable) {
        a->broken = a->outside = 1;
        a->badness = INFINITY;
        return ST_OK;
    }
    if (!a->d.has_divergence)
        return ST_OK;
    if ((st = check_envelope(tab, samples, n_samples, run, &a->env)))
        return st;
    a->outside = a->env.outside;
    a->badness = a->env.max_scaled;
    return ST_OK;
}

/* The attempts' figures together: the largest distance and raw ULP of any
 * attempt, and the tensor nearest its limit in any. */
static void attempts_merge(struct envelope_check *all, uint64_t *max_ulp, const char **max_ulp_path,
                           const struct attempt *a)
{
    if (a->d.max_ulp > *max_ulp || !*max_ulp_path) {
        *max_ulp = a->d.max_ulp;
        *max_ulp_path = a->d.max_ulp_path;
    }
    if (!a->d.has_divergence || a->broken)
        return;
    const struct envelope_check *e = &a->env;
    if (e->max_scaled > all->max_scaled)
        all->max_scaled = e->max_scaled;
    if (e->worst_path[0] && (e->worst_ratio > all->worst_ratio || !all->worst_path[0])) {
        all->worst_ratio = e->worst_ratio;
        all->worst_distance = e->worst_distance;
        snprintf(all->worst_path, sizeof all->worst_path, "%s", e->worst_path);
    }
    all->bitwise_tensors_differ = e->bitwise_tensors_differ > all->bitwise_tensors_differ
                                      ? e->bitwise_tensors_differ : all->bitwise_tensors_differ;
    all->impl_varies = e->impl_varies > all->impl_varies ? e->impl_varies : all->impl_varies;
    all->downstream_of_noise =
        e->downstream_of_noise > all->downstream_of_noise ? e->downstream_of_noise : all->downstream_of_noise;
}

/* FAIL: `outside` of the n attempts lie outside; *worst is the farthest
 * (a broken one first, then the largest max scaled ULP). Its first tensor
 * outside is the first divergence. */
static void attempts_fail(const struct spread_table *tab, int n, int outside, const struct attempt *worst,
                          const struct run_record *run, double max_scaled, struct impl_result *res)
{
    const struct run_record *base = tab->baselines[0];
    const struct envelope_check *env = &worst->env;
    char a[32], b[32], e[32], f[32], intro[160], where[TENSOR_WHERE_MAX];
    res->verdict = V_FAIL;
    /* More baselines may widen an envelope; none makes a missing tensor appear. */
    res->outside_envelope = !worst->broken;
    if (n > 1)
        snprintf(intro, sizeof intro, "differs in %d of %d attempts (the run and %d re-run(s); the worst, %s)", outside,
                 n, n - 1, worst->run->name);
    else
        snprintf(intro, sizeof intro, "differs in %d of %d attempts", outside, n);
    if (worst->broken)
        snprintf(res->decided_by, sizeof res->decided_by, "%s", worst->d.n_missing ? "missing tensor" : "dtype/shape");
    if (worst->broken && worst->d.n_missing) {
        int in_it = run_record_find(worst->run, worst->d.first_missing) != NULL;
        const char *has = in_it ? worst->run->name : base->name, *lacks = in_it ? base->name : worst->run->name;
        snprintf(where, sizeof where, "%s missing in %s", worst->d.first_missing, lacks);
        text_setf(&res->reason, "%s: %s is recorded by %s but not by %s (%d tensor(s) on one side "
                 "only)", intro, worst->d.first_missing, has, lacks, worst->d.n_missing);
    } else if (worst->broken) {
        snprintf(where, sizeof where, "%s: %s", worst->d.incomparable_path, worst->d.incomparable_why);
        text_setf(&res->reason, "%s: %s differs in dtype or shape: %s", intro,
                 worst->d.incomparable_path, worst->d.incomparable_why);
    } else if (env->diff.integer) {
        /* Counts (num_batches_tracked, a step counter, a mask): values, not ULPs. */
        describe_tensor(base, env->path, &env->diff, where, sizeof where);
        char floats[64] = "";
        if (max_scaled > 0)
            snprintf(floats, sizeof floats, "; floating tensors: max scaled ULP %s",
                     scaled_format(max_scaled, b, sizeof b));
        if (env->baselines_bitwise)
            text_setf(&res->reason,
                     "%s: %s: its %d baselines agree bitwise, %s's values differ: %.0f vs %.0f (%zu of %zu "
                     "elements differ, by up to %llu; an integer tensor, compared as values)%s",
                     intro, env->path, tab->nb, worst->run->name, env->diff.first_a, env->diff.first_b,
                     env->diff.n_differ, env->diff.count, (unsigned long long)env->diff.max_value_diff, floats);
        else
            text_setf(&res->reason,
                     "%s: %s lies outside its noise envelope: its values differ by up to %llu vs its baselines' "
                     "spread %.0f over %d runs, NOISE allows %gx max(spread, 1) (an integer tensor, compared as "
                     "values)%s",
                     intro, env->path, (unsigned long long)env->diff.max_value_diff, env->spread, tab->nb,
                     JUDGE_NOISE_MARGIN, floats);
    } else {
        describe_tensor(base, env->path, &env->diff, where, sizeof where);
        if (env->baselines_bitwise)
            text_setf(&res->reason,
                     "%s: %s: its %d baselines agree bitwise, %s differs by %s scaled ULP (max |x| %.3g; its raw max "
                     "ULP %s); max scaled ULP %s",
                     intro, env->path, tab->nb, worst->run->name, scaled_format(env->distance, a, sizeof a),
                     env->scale, ulp_format(env->diff.max_ulp, e, sizeof e), scaled_format(max_scaled, b, sizeof b));
        else
            text_setf(&res->reason,
                     "%s: %s lies outside its noise envelope: %s scaled ULP (max |x| %.3g; its raw max ULP %s) vs its "
                     "baselines' spread %s over %d runs, NOISE allows %gx max(spread, 1); max scaled ULP %s",
                     intro, env->path, scaled_format(env->distance, a, sizeof a), env->scale,
                     ulp_format(env->diff.max_ulp, e, sizeof e), scaled_format(env->spread, b, sizeof b), tab->nb,
                     JUDGE_NOISE_MARGIN, scaled_format(max_scaled, f, sizeof f));
    }
    if (worst->run == run)
        text_set(&res->first_divergence, where);
    else
        text_setf(&res->first_divergence, "%s: %s", worst->run->name, where);
}

/* PASS, NOISE or FAIL over every attempt (samples[0] is the run, the rest
 * its completed re-runs; some attempt differs from baseline_0). Every
 * attempt must lie inside every envelope: a checkpoint bug that shows in
 * one attempt of N is a bug, however many others reproduce baseline_0. */
static int judge_attempts(const struct ckpt_case *c, const struct spread_table *tab,
                          const struct run_record *const *samples, int n, struct impl_result *res)
{
    const struct run_record *base = tab->baselines[0], *run = samples[0];
    struct attempt cur, worst;
    struct envelope_check all;
    memset(&all, 0, sizeof all);
    memset(&worst, 0, sizeof worst);
    uint64_t max_ulp = 0;
    const char *max_ulp_path = NULL;
    int outside = 0, any_broken = 0, any_counts = 0, st;
    for (int k = 0; k < n; k++) {
        if ((st = judge_attempt(tab, samples, n, samples[k], &cur)))
            return st;
        attempts_merge(&all, &max_ulp, &max_ulp_path, &cur);
        any_broken |= cur.broken;
        any_counts |= cur.d.n_integer_differ > 0;
        if (cur.d.has_divergence && !text_len(&res->first_divergence)) {
            char where[TENSOR_WHERE_MAX];
            describe_tensor(base, cur.d.first_path, &cur.d.first, where, sizeof where);
            text_setf(&res->first_divergence, "%s%s%s", k ? cur.run->name : "", k ? ": " : "", where);
        }
        if (cur.outside && (!outside || cur.badness > worst.badness))
            worst = cur;
        outside += cur.outside;
    }
    char a[32], b[32], e[32];
    res->max_ulp = max_ulp;
    res->max_scaled_ulp = all.max_scaled;
    res->noise_ratio = all.worst_ratio;
    res->bitwise_tensors_differ = all.bitwise_tensors_differ;
    /* A tolerance is in ULPs: it never covers integer values that differ. */
    if (c->tolerance > 0 && !any_broken && !any_counts && (double)max_ulp <= c->tolerance) {
        res->verdict = V_PASS;
        text_setf(&res->reason,
                 "within the case's tolerance: raw max ULP %s <= %g (%s%s); max scaled ULP %s",
                 ulp_format(max_ulp, a, sizeof a), c->tolerance, max_ulp_path ? max_ulp_path : "",
                 n > 1 ? ", over all attempts" : "", scaled_format(all.max_scaled, b, sizeof b));
        return ST_OK;
    }
    if (outside) {
        attempts_fail(tab, n, outside, &worst, run, all.max_scaled, res);
        return ST_OK;
    }
    res->verdict = V_NOISE;
    char attempts[80] = "";
    if (n > 1)
        snprintf(attempts, sizeof attempts, " in all %d attempts (the run and %d re-run(s))", n, n - 1);
    /* A twin's family spreads by what it mixes (run_record.h noise_cause),
     * said first: it frames the figures after it. */
    if (text_len(&run->noise_cause))
        text_setf(&res->reason,
                             "%s; every tensor within %gx its own spread over %d baselines%s: max scaled ULP %s; "
                             "nearest its limit %s, %s scaled ULP, %.3gx its spread; raw max ULP %s",
                             text_str(&run->noise_cause), JUDGE_NOISE_MARGIN, tab->nb, attempts,
                             scaled_format(all.max_scaled, e, sizeof e), all.worst_path,
                             scaled_format(all.worst_distance, b, sizeof b), all.worst_ratio,
                             ulp_format(max_ulp, a, sizeof a));
    else
        text_setf(&res->reason,
                             "every tensor within %gx its own spread over %d baselines%s: max scaled ULP %s; "
                             "nearest its limit %s, %s scaled ULP, %.3gx its spread; raw max ULP %s: kernel "
                             "non-determinism, not the checkpoint",
                             JUDGE_NOISE_MARGIN, tab->nb, attempts, scaled_format(all.max_scaled, e, sizeof e),
                             all.worst_path, scaled_format(all.worst_distance, b, sizeof b), all.worst_ratio,
                             ulp_format(max_ulp, a, sizeof a));
    if (all.impl_varies || all.downstream_of_noise)
        text_appendf(&res->reason,
                 " (the baselines drew %d differing tensor(s) alike: %d vary between this impl's own runs, %d "
                 "come after a step where noise showed)",
                 all.impl_varies + all.downstream_of_noise, all.impl_varies, all.downstream_of_noise);
    return ST_OK;
}

/* PASS, NOISE or FAIL from the tensors alone (the run completed): the run
 * and every re-run of it that completed are the attempts. */
static int judge_tensors(const struct ckpt_case *c, const struct run_record *const *baselines, int nb,
                         const struct run_record *const *reruns, int n_reruns, const struct run_record *run,
                         struct impl_result *res)
{
    const struct run_record *base = baselines[0];
    struct run_diff d;
    int st = compare_runs(base, run, NULL, &d);
    if (st)
        return st;
    res->max_ulp = d.max_ulp;
    res->input_grads_only_in_run = d.n_input_grads_b_only;
    snprintf(res->first_input_grad_only_in_run, sizeof res->first_input_grad_only_in_run, "%s",
             d.first_input_grad_b_only);
    if (d.n_missing) {
        int in_run = run_record_find(run, d.first_missing) != NULL;
        res->verdict = V_FAIL;
        snprintf(res->decided_by, sizeof res->decided_by, "missing tensor");
        text_setf(&res->first_divergence, "%s missing in %s", d.first_missing, in_run ? base->name : run->name);
        text_setf(&res->reason, "%s is recorded by %s but not by %s (%d tensor(s) on one side only)",
                 d.first_missing, in_run ? run->name : base->name, in_run ? base->name : run->name, d.n_missing);
        return ST_OK;
    }
    if (d.incomparable) {
        res->verdict = V_FAIL;
        snprintf(res->decided_by, sizeof res->decided_by, "dtype/shape");
        text_setf(&res->first_divergence, "%s: %s", d.incomparable_path, d.incomparable_why);
        text_setf(&res->reason, "%s differs in dtype or shape: %s", d.incomparable_path,
                 d.incomparable_why);
        return ST_OK;
    }
    /* The attempts: this run and its re-runs that completed. */
    const struct run_record *samples[65];
    int n_samples = 0, any_differs = d.has_divergence;
    samples[n_samples++] = run;
    for (int k = 0; k < n_reruns && n_samples < 65; k++)
        if (!reruns[k]->outcome[0])
            samples[n_samples++] = reruns[k];
    for (int k = 1; k < n_samples && !any_differs; k++) {
        struct run_diff rd;
        if ((st = compare_runs(base, samples[k], NULL, &rd)))
            return st;
        any_differs = rd.has_divergence || rd.n_missing || rd.incomparable;
    }
    if (!any_differs) {
        int per_step = 0, buffers = 0;
        for (int i = 0; i < base->n; i++) {
            per_step += strncmp(base->items[i].path, "steps/", 6) == 0;
            buffers += strncmp(base->items[i].path, "steps/", 6) == 0 && strstr(base->items[i].path, "/buffers/");
        }
        res->verdict = V_PASS;
        if (buffers)
            text_setf(&res->reason,
                           "bitwise identical to %s: %d per-step tensors (losses, gradients), %d per-step buffers "
                           "and %d final parameters", base->name, per_step - buffers, buffers, d.n_tensors - per_step);
        else
            text_setf(&res->reason,
                           "bitwise identical to %s: %d per-step tensors (losses, gradients) and %d final parameters",
                           base->name, per_step, d.n_tensors - per_step);
        if (n_samples > 1)
            text_appendf(&res->reason, ", in all %d attempts (the run and %d "
                     "re-run(s))", n_samples, n_samples - 1);
        return ST_OK;
    }
    struct spread_table tab;
    if ((st = spread_table_build(baselines, nb, &tab)))
        return st;
    tab.record = res;
    if (!(st = first_noisy_step(&tab, samples, n_samples, &tab.noisy_from)))
        st = judge_attempts(c, &tab, samples, n_samples, res);
    spread_table_free(&tab);
    return st;
}

/* The case's explicit requirements: min_memory_saving on the peak cut,
 * min_held_cut on the cut in bytes held at the end of forward. */
/* Whether a memory requirement is judged on a run as it stands: one with
 * right gradients (PASS, NOISE, a MEMFAIL already, or a FAIL of a run check
 * alone, whose figures stand: gradients_right). */
static int memory_judged(const struct impl_result *res)
{
    return res->verdict == V_PASS || res->verdict == V_NOISE || res->verdict == V_MEMFAIL ||
           (res->verdict == V_FAIL && res->gradients_right);
}

/* A memory finding `why` about a run: every finding is reported, the first
 * deciding the verdict. A PASS or NOISE becomes MEMFAIL ("gradients right,
 * but ..."), its first divergence `where` (NULL: kept); a MEMFAIL adds it
 * ("; and ..."); a FAIL of a run check alone (a hook count) keeps its FAIL
 * and adds it as what it would also be ("; also MEMFAIL: ..."). */
static void memory_finding(struct impl_result *res, const char *why, const char *where)
{
    if (res->verdict == V_FAIL) {
        text_appendf(&res->reason, "; also MEMFAIL: %s", why);
    } else if (res->verdict == V_MEMFAIL) {
        if (!strstr(text_str(&res->reason), why)) /* already the verdict (a leak it caused, judge_run) */
            text_appendf(&res->reason, "; and %s", why);
    } else {
        res->verdict = V_MEMFAIL;
        text_setf(&res->reason, "gradients right, but %s", why);
        if (where)
            text_set(&res->first_divergence, where);
    }
}

static void memory_requirement(const struct ckpt_case *c, double base_peak, struct impl_result *res)
{
    if (!memory_judged(res) || res->verdict == V_MEMFAIL)
        return;
    char why[FIGURES_MAX];
    if (c->min_memory_saving >= 0 && !(res->memory_saved >= c->min_memory_saving)) {
        snprintf(why, sizeof why,
                 "peak memory saved %.1f%% < required %.1f%% (min_memory_saving; peak %.0f bytes vs baseline %.0f "
                 "bytes)",
                 100 * res->memory_saved, 100 * c->min_memory_saving, res->peak_bytes, base_peak);
        memory_finding(res, why, NULL);
    } else if (c->min_held_cut >= 0 && !(res->end_forward_saved >= c->min_held_cut)) {
        snprintf(why, sizeof why,
                 "bytes held at the end of forward cut %.1f%% < required %.1f%% (min_held_cut; %.0f bytes vs "
                 "baseline %.0f bytes)",
                 100 * res->end_forward_saved, 100 * c->min_held_cut, res->end_forward_bytes,
                 res->baseline_end_forward_bytes);
        memory_finding(res, why, NULL);
    }
}

/* A run with right gradients must hold, at the end of forward, the bytes
 * its prediction says (held_check.h), and so must the baseline it is
 * compared with; a non-reentrant run must keep from forward the ops its
 * policy names and, for the gpt block, the bytes the policy's statement
 * gives (policy_statement.h). Outside the device's tolerance the verdict
 * is MEMFAIL, naming the run that is off, by how much and on which side.
 * What cannot be judged (no prediction) is said in the reason. */
static void held_requirement(const struct ckpt_case *c, const struct run_record *base, const struct run_record *run,
                             struct impl_result *res)
{
    if (!memory_judged(res))
        return;
    char why[FIGURES_MAX], note[FIGURES_MAX] = "", where[FIGURES_MAX + 200];
    const struct run_record *off = NULL;
    const char *what = "memory.end_forward_bytes";
    /* A user's run: its statement, drawn from the baseline's memory map. */
    struct text user_why = {0}, user_where = {0};
    enum user_memory_outcome user = user_memory_check(base, run, &user_why, &user_where);
    const char *uw = text_str(&user_why);
    res->reason.failed |= user_why.failed | user_where.failed;
    int user_said = user == USER_MEMORY_FAIL || user == USER_MEMORY_OK || uw[0];
    if (user == USER_MEMORY_FAIL) {
        memory_finding(res, uw, text_str(&user_where));
    } else if (user == USER_MEMORY_OK || uw[0]) {
        /* Memory that could not be judged says so in the verdict line, never
         * silently; a control run, marked so by its user, in brackets. */
        if (user == USER_MEMORY_UNJUDGED && strncmp(uw, "memory not judged", 17) == 0)
            text_appendf(&res->reason, "; %s", uw);
        else if (user == USER_MEMORY_UNJUDGED)
            text_appendf(&res->reason, " [%s]", uw);
        else if (strstr(uw, "above its statement") || strstr(uw, "too small to tell"))
            /* a PASS holding more than stated says how much and what; one too small to judge, that */
            text_appendf(&res->reason, " [memory: %s]", uw);
    }
    text_free(&user_why);
    text_free(&user_where);
    if (user_said)
        return;
    enum held_outcome own = held_check_run(run, c->device, why, sizeof why);
    if (own == HELD_OFF)
        off = run;
    else if (own == HELD_UNJUDGED)
        snprintf(note, sizeof note, "%s", why);
    if (!off && held_check_run(base, c->device, why, sizeof why) == HELD_OFF)
        off = base;
    if (!off) {
        enum held_outcome stated = policy_statement_check_run(c, run, res->impl, why, sizeof why);
        if (stated == HELD_OFF) {
            off = run;
            what = "selective";
        } else if (stated == HELD_UNJUDGED && why[0] && !note[0]) {
            snprintf(note, sizeof note, "%s", why);
        }
    }
    if (off) {
        snprintf(where, sizeof where, "/runs/%s/%s: %s", off->name, what, why);
        memory_finding(res, why, where);
    }
    if (note[0])
        text_appendf(&res->reason, " [%s]", note);
}

/* codegen_rounding.h's rule for a run FAILed by its envelope whose code a
 * compiler optimized: its twin <name>_graphs judged against its own family,
 * and that family's first baseline. */
static int judge_rounding(const struct ckpt_case *c, const struct run_record *runs, int n,
                          const struct run_record *base, const struct run_record *run,
                          const struct run_record *const *reruns, int n_reruns, struct impl_result *res)
{
    char twin_name[96], graphs_name[96];
    snprintf(twin_name, sizeof twin_name, "%s_graphs", run->name);
    const struct run_record *twin = judge_find_run(runs, n, twin_name), *graphs_base = NULL;
    struct impl_result twin_res; /* a twin without codegen: judge_run does not come back here */
    memset(&twin_res, 0, sizeof twin_res);
    int st = ST_OK;
    if (twin && twin->baselines[0]) {
        snprintf(graphs_name, sizeof graphs_name, "%s_0", twin->baselines);
        graphs_base = judge_find_run(runs, n, graphs_name);
    }
    if (twin && graphs_base && !(run_record_attr(twin, "compile.codegen") >= CODEGEN_INDUCTOR) &&
        (st = judge_run(c, runs, n, twin_name, &twin_res))) {
        impl_result_free(&twin_res);
        return st;
    }
    const struct run_record *samples[65];
    int n_samples = 0;
    samples[n_samples++] = run;
    for (int k = 0; k < n_reruns && n_samples < 65; k++)
        if (!reruns[k]->outcome[0])
            samples[n_samples++] = reruns[k];
    st = codegen_rounding_judge(base, samples, n_samples, twin, &twin_res, graphs_base, res);
    impl_result_free(&twin_res);
    return st;
}

int judge_run(const struct ckpt_case *c, const struct run_record *runs, int n, const char *name,
              struct impl_result *res)
{
    memset(res, 0, sizeof *res);
    snprintf(res->impl, sizeof res->impl, "%s", name);
    const struct run_record *baselines[64], *reruns[64], *run = judge_find_run(runs, n, name);
    int nb = 0, n_reruns = 0;
    if (!run)
        return error_set(ST_INPUT, "/runs/%s: run missing", name);
    snprintf(res->role, sizeof res->role, "%s", run->role);
    const char *family = run->baselines[0] ? run->baselines : "baseline";
    char base_name[80];
    snprintf(base_name, sizeof base_name, "%s_0", family);
    const struct run_record *base = judge_find_run(runs, n, base_name);
    if (!base)
        return error_set(ST_INPUT, "/runs/%s: run missing (judging %s needs baselines named %s_0, %s_1, ...)",
                         base_name, name, family, family);
    baselines[nb++] = base;
    for (int i = 0; i < n; i++) {
        if (judge_is_baseline_of(runs[i].name, family) && &runs[i] != base && !runs[i].outcome[0] && nb < 64)
            baselines[nb++] = &runs[i];
        if (judge_is_rerun_of(runs[i].name, name) && n_reruns < 64)
            reruns[n_reruns++] = &runs[i];
    }
    if (base->outcome[0])
        return error_set(ST_INPUT, "/runs/%s: the baseline itself did not complete (%s: %s)", base_name,
                         base->outcome, text_str(&base->message));
    int violated;
    char why[FIGURES_MAX], where[FIGURES_MAX];
    /* Its hooks; its bytes are the reference (a file's baseline may allocate lazily). */
    int st = run_checks_judge(base, base, &violated, why, sizeof why, where, sizeof where);
    if (st)
        return st;
    if (violated)
        return error_set(ST_INPUT, "/runs/%s: the baseline itself fails a run check: %s", base_name, why);
    if (strcmp(run->outcome, RUN_OUTCOME_ERROR) == 0) {
        res->verdict = V_ERROR;
        text_set(&res->reason, text_str(&run->message));
    } else if (strcmp(run->outcome, RUN_OUTCOME_CHECK_FAILED) == 0) {
        res->verdict = V_FAIL;
        text_setf(&res->reason, "the checkpoint's own check failed: %s", text_str(&run->message));
        text_set(&res->first_divergence, text_str(&run->message));
        text_set(&res->op_log, text_str(&run->op_log));
    } else if ((st = judge_tensors(c, baselines, nb, reruns, n_reruns, run, res))) {
        return st;
    } else if (codegen_rounding_applies(base, run, res) && (st = judge_rounding(c, runs, n, base, run, reruns, n_reruns,
                                                                          res))) {
        return st;
    }
    /* Hooks and leaks: a run whose tensors passed can still fail them (a
     * run the tensors already fail keeps that reason). */
    if (!run->outcome[0] && (res->verdict == V_PASS || res->verdict == V_NOISE)) {
        if ((st = run_checks_judge(run, base, &violated, why, sizeof why, where, sizeof where)))
            return st;
        struct text mem = {0}, at = {0};
        char undecided[FIGURES_MAX];
        if (violated && strncmp(why, "leak", 4) == 0 &&
            user_memory_check(base, run, &mem, &at) == USER_MEMORY_FAIL) {
            /* A user's run whose memory names what it holds: that finding is
             * the verdict, the step-start growth it causes its consequence. */
            text_setf(&res->reason, "gradients right, but %s; and %s", text_str(&mem), why);
            text_set(&res->first_divergence, text_str(&at));
            res->verdict = V_MEMFAIL;
            res->gradients_right = 1;
        } else if (violated) {
            /* The same work with the right gradients: what breaks is what
             * hangs on the run beyond them, and its figures stand. */
            text_setf(&res->reason, "gradients %s %s, but %s",
                     res->verdict == V_PASS ? "bitwise identical to" : "within the kernels' noise of", base_name, why);
            text_set(&res->first_divergence, where);
            res->verdict = V_FAIL;
            res->gradients_right = 1;
        } else if (run_checks_leak_undecided(run, base, undecided, sizeof undecided)) {
            text_appendf(&res->reason, " [%s]", undecided);
        }
        res->reason.failed |= mem.failed | at.failed;
        text_free(&mem);
        text_free(&at);
    }
    if (text_len(&run->warning) && res->verdict != V_PASS)
        text_appendf(&res->reason, " [warning: %s]", text_str(&run->warning));
    run_figures(runs, n, family, base, run, res);
    /* FAIL and ERROR runs did not do the same work: their figures would
     * mislead, so they are left out of savings and overheads; a FAIL of a
     * run check alone (its gradients right) did, and keeps them. */
    if ((res->verdict == V_FAIL && !res->gradients_right) || res->verdict == V_ERROR)
        res->memory_saved = res->end_forward_saved = res->overhead = NAN;
    memory_requirement(c, run_record_attr(base, "memory.peak_bytes"), res);
    xla_evidence_judge(base, run, res);
    compile_evidence_judge(base, run, res);
    held_requirement(c, base, run, res);
    apply_observability(run, res);
    /* What the baseline itself warned of (parameters that require grad
     * but got none) qualifies every verdict judged against it, PASS too. */
    if (text_len(&base->warning))
        text_appendf(&res->reason, " [baseline warning: %s]", text_str(&base->warning));
    if (res->input_grads_only_in_run) {
        char more[48] = "";
        if (res->input_grads_only_in_run > 1)
            snprintf(more, sizeof more, " and %d more", res->input_grads_only_in_run - 1);
        text_appendf(&res->reason, " [input gradient computed by %s only, not by %s, so not compared: %s%s]", name, base_name, res->first_input_grad_only_in_run, more);
    }
    /* A run that patched the model's classes is named whatever its
     * verdict, first: what it changed frames everything after. */
    if (text_len(&run->class_patches))
        text_prependf(&res->reason, "%s; ", text_str(&run->class_patches));
    res->expected_mask = expected_mask(c, run);
    res->expected = (res->expected_mask >> res->verdict) & 1u;
    return impl_result_check(res);
}

/* ---- a whole case --------------------------------------------------------- */

static int case_figures(const struct run_record *runs, int n, struct case_result *out)
{
    const struct run_record *base = judge_find_run(runs, n, "baseline_0"), *fastest = fastest_baseline(runs, n, "baseline");
    out->baseline_runs = 0;
    out->noise_floor_ulp = 0;
    out->noise_floor_scaled = 0;
    for (int i = 0; i < n && base; i++) {
        if (!judge_is_baseline_of(runs[i].name, "baseline") || runs[i].outcome[0])
            continue;
        out->baseline_runs++;
        if (&runs[i] == base)
            continue;
        for (int k = 0; k < base->n; k++) {
            const struct run_tensor *ref = &base->items[k], *t = run_record_find(&runs[i], ref->path);
            if (strncmp(ref->path, "steps/", 6) != 0 || !t || run_tensors_same_object(base, ref, &runs[i], t))
                continue;
            struct tensor_hold hr, ht;
            int st = run_tensor_acquire(base, ref, &hr);
            if (st)
                return st;
            if ((st = run_tensor_acquire(&runs[i], t, &ht))) {
                run_tensor_release(&hr);
                return st;
            }
            struct tensor_diff d;
            if (!host_tensors_bitwise_equal(&hr.t, &ht.t) && compare_tensors(&hr.t, &ht.t, &d) == ST_OK &&
                !d.bitwise_equal) {
                if (d.max_ulp > out->noise_floor_ulp)
                    out->noise_floor_ulp = d.max_ulp;
                double s = compare_scaled_distance(&hr.t, &ht.t, NULL);
                if (s > out->noise_floor_scaled || !out->noise_floor_path[0]) {
                    out->noise_floor_scaled = s;
                    snprintf(out->noise_floor_path, sizeof out->noise_floor_path, "%s", ref->path);
                }
            }
            error_clear();
            run_tensor_release(&hr);
            run_tensor_release(&ht);
        }
    }
    out->baseline_peak_bytes = run_record_attr(base, "memory.peak_bytes");
    out->baseline_end_forward_bytes = run_record_attr(base, "memory.end_forward_bytes");
    out->baseline_grad_bytes = run_record_attr(base, "memory.grad_bytes");
    out->baseline_activation_peak_bytes = run_record_attr(base, "memory.activation_peak_bytes");
    out->one_time_bytes = run_record_attr(base, "memory.one_time_bytes");
    out->predicted_baseline_end_forward_bytes = run_record_attr(base, "memory.predicted_end_forward_bytes");
    out->predicted_checkpointed_end_forward_bytes =
        run_record_attr(base, "memory.predicted_checkpointed_end_forward_bytes");
    out->param_bytes = run_record_attr(base, "memory.param_bytes");
    if (fastest) {
        out->baseline_forward_ms = run_record_attr(fastest, "timing.forward_ms");
        out->baseline_step_ms = step_ms(fastest);
        /* Recomputing every checkpointed layer once costs one more forward. */
        out->ideal_overhead = (out->baseline_step_ms + out->baseline_forward_ms) / out->baseline_step_ms;
        double timed = run_record_attr(fastest, "timing.timed_steps");
        out->timed_steps = isnan(timed) ? 0 : (int)timed;
    }
    /* The baselines are the same work: their spread says how much the
     * machine disturbed this case's timings. */
    out->slowest_baseline_step_ms = 0;
    for (int i = 0; i < n; i++)
        if (judge_is_baseline_of(runs[i].name, "baseline") && step_ms(&runs[i]) > out->slowest_baseline_step_ms)
            out->slowest_baseline_step_ms = step_ms(&runs[i]);
    return ST_OK;
}

static int already_judged(const struct case_result *out, const char *name)
{
    for (int i = 0; i < out->n_results; i++)
        if (strcmp(out->results[i].impl, name) == 0)
            return 1;
    return 0;
}


static const struct gone_run *find_gone(const struct gone_run *gone, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(gone[i].name, name) == 0)
            return &gone[i];
    return NULL;
}

/* ERROR, never expected (whatever expect allows: a report that lacks a run
 * cannot vouch for it), no figures. */
static void gone_result(const struct gone_run *g, struct impl_result *res)
{
    memset(res, 0, sizeof *res);
    snprintf(res->impl, sizeof res->impl, "%s", g->name);
    res->verdict = V_ERROR;
    res->expected = 0;
    text_set(&res->reason, g->reason);
    text_set(&res->first_divergence, g->first_missing);
    res->memory_saved = res->end_forward_saved = res->overhead = res->noise_ratio = NAN;
    res->baseline_step_ms = res->baseline_peak_bytes = res->baseline_end_forward_bytes = NAN;
    res->stated_end_forward_bytes = res->judged_held_bytes = NAN;
    res->memory_step = res->memory_recomputed_ops = -1;
    res->peak_bytes = res->end_forward_bytes = res->forward_peak_bytes = res->backward_peak_bytes = NAN;
    res->grad_bytes = res->activation_peak_bytes = res->predicted_end_forward_bytes = NAN;
    res->forward_ms = res->backward_ms = res->recompute_ms = res->step_ms = res->recomputed_ops_ms = NAN;
}

/* A judged twin's FAIL opens with what it compares: the run, right against
 * its own family, lies outside the mixed family (its own family's plain runs
 * with another's), which is no finding about the checkpoint within its own
 * family and says nothing of the rounding there (docs/compile.md). */
static void twin_fail_says_what_it_compares(const struct run_record *twin_run, const struct impl_result *of,
                                            const char *own, struct impl_result *twin)
{
    text_prependf(&twin->reason,
                  "%s, itself %s against %s_0, judged again against %s_<k> (the plain runs of its family and of "
                  "another)%s: ",
                  twin_run->twin_of, verdict_name(of->verdict), own,
                  twin_run->baselines[0] ? twin_run->baselines : "baseline",
                  twin->outside_envelope ? ", further from them than they are from each other" : "");
}

/* A twin (run_record.h twin_of) is its run judged again against a mixed
 * family (one process and distributed, eager and compiled). It takes no
 * expectation of its own from the run: where the run's own verdict is not
 * PASS or NOISE (a FAIL of its gradients, a MEMFAIL, an ERROR) that verdict
 * is the finding, whether expected or not, and it explains any difference
 * from the mixed family: the twin is then not judged (expected, its
 * measured verdict kept and named in the reason; the run's row has why). A run FAILed only by a
 * run check (gradients right: a hook count, a leak) leaves its twin judged,
 * since the gradients it compares are the right ones. */
static void twins_follow_their_runs(const struct run_record *runs, int n, struct case_result *out)
{
    for (int i = 0; i < out->n_results; i++) {
        struct impl_result *twin = &out->results[i];
        const struct run_record *r = judge_find_run(runs, n, twin->impl);
        if (!r || !r->twin_of[0])
            continue;
        const struct impl_result *of = NULL;
        for (int k = 0; k < out->n_results; k++)
            if (strcmp(out->results[k].impl, r->twin_of) == 0)
                of = &out->results[k];
        const struct run_record *src = judge_find_run(runs, n, r->twin_of);
        const char *own = src && src->baselines[0] ? src->baselines : "baseline";
        if (!of)
            continue;
        if (of->verdict == V_PASS || of->verdict == V_NOISE || (of->verdict == V_FAIL && of->gradients_right)) {
            if (twin->verdict == V_FAIL)
                twin_fail_says_what_it_compares(r, of, own, twin);
            continue;
        }
        text_setf(&twin->reason,
                 "not judged: %s is itself %s against %s_0 (%s), which explains any difference from this family "
                 "(measured here: %s)",
                 r->twin_of, verdict_name(of->verdict), own, of->expected ? "expected" : "unexpected",
                 verdict_name(twin->verdict));
        twin->expected = 1;
        twin->not_judged = 1;
    }
}

/* judge_case with the names to judge first as strings of any length, and
 * the runs judge_file found absent or incomplete: each is an ERROR record
 * in its place instead of a verdict. */
int judge_listed(const struct ckpt_case *c, const struct run_record *runs, int n, const char *const *order,
                 int n_order, const struct gone_run *gone, int n_gone, struct case_result *out)
{
    int max = (int)(sizeof out->results / sizeof *out->results);
    out->n_results = 0;
    if (!judge_find_run(runs, n, "baseline_0"))
        return error_set(ST_INPUT, "/runs/baseline_0: run missing (judging needs baselines named baseline_0, "
                                   "baseline_1, ...)");
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < (pass ? n : n_order); i++) {
            const char *name = pass ? runs[i].name : order[i];
            const struct gone_run *g = find_gone(gone, n_gone, name);
            if (judge_is_baseline(name) || judge_is_rerun(name) || already_judged(out, name) ||
                (!g && !judge_find_run(runs, n, name)))
                continue;
            if (out->n_results == max)
                return error_set(ST_INPUT, "more than %d runs to judge", max);
            struct impl_result *res = &out->results[out->n_results];
            if (g) {
                gone_result(g, res);
                res->expected_mask = expected_mask_of(c, name, judge_find_run(runs, n, name));
            } else {
                int st = judge_run(c, runs, n, name, res);
                if (st) {
                    impl_result_free(res); /* what it had composed */
                    return st;
                }
                /* A record always says why (a run may end in an error it
                 * gave no message for). */
                if (!text_len(&res->reason))
                    text_set(&res->reason,
                             res->verdict == V_ERROR ? "the run ended in an error (outcome=error) and recorded no "
                                                       "message"
                                                     : "no reason recorded");
            }
            out->n_results++;
        }
    }
    twins_follow_their_runs(runs, n, out);
    return case_figures(runs, n, out);
}

int judge_case(const struct ckpt_case *c, const struct run_record *runs, int n,
               const char (*order)[CASE_WORD_MAX], int n_order, struct case_result *out)
{
    const char *names[CASE_MAX_IMPLS];
    int k = 0;
    for (int i = 0; i < n_order && k < CASE_MAX_IMPLS; i++)
        names[k++] = order[i];
    return judge_listed(c, runs, n, names, k, NULL, 0, out);
}
