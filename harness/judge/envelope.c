#include "envelope.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "run_tensors.h"

int envelope_in_scope(const char *path)
{
    return strncmp(path, "steps/", 6) == 0 || strncmp(path, "final_params/", 13) == 0;
}


/* The spread of one tensor over the baselines: max distance at its scale
 * from baseline_0 to any other baseline; *bitwise = 1 when they all agree
 * bit for bit. Baselines that do not all hold the tensor, with the same
 * dtype and shape, are not the same training: ST_INPUT naming it. */
static int tensor_spread(const struct run_record *const *baselines, int nb, const struct run_tensor *ref,
                         double *spread, int *bitwise)
{
    *spread = 0;
    *bitwise = 1;
    struct tensor_hold hr = {0};
    int held = 0, st = ST_OK;
    for (int k = 1; k < nb && st == ST_OK; k++) {
        const struct run_tensor *t = run_record_find(baselines[k], ref->path);
        if (!t) {
            st = error_set(ST_INPUT, "/runs/%s/%s: missing, but baseline_0 has it (baselines of one case must "
                                     "record the same tensors)", baselines[k]->name, ref->path);
            break;
        }
        if (run_tensors_same_object(baselines[0], ref, baselines[k], t))
            continue;
        struct tensor_hold ht;
        if (!held && (st = run_tensor_acquire(baselines[0], ref, &hr)) == ST_OK)
            held = 1;
        if (st || (st = run_tensor_acquire(baselines[k], t, &ht)))
            break;
        struct tensor_diff d;
        if (host_tensors_bitwise_equal(&hr.t, &ht.t)) {
            run_tensor_release(&ht);
            continue;
        }
        if ((st = compare_tensors(&hr.t, &ht.t, &d))) {
            error_wrap(st, "%s", ref->path);
        } else if (!d.comparable) {
            st = error_set(ST_INPUT, "/runs/%s/%s: %s (baselines of one case must record the same tensors)",
                           baselines[k]->name, ref->path, d.why);
        } else {
            *bitwise = 0;
            double distance = compare_scaled_distance(&hr.t, &ht.t, NULL);
            if (distance > *spread || isnan(distance))
                *spread = isnan(distance) ? INFINITY : distance;
        }
        run_tensor_release(&ht);
    }
    if (held)
        run_tensor_release(&hr);
    return st;
}


void spread_table_free(struct spread_table *tab)
{
    free(tab->spread);
    free(tab->bitwise);
    tab->spread = NULL;
    tab->bitwise = NULL;
}

int spread_table_build(const struct run_record *const *baselines, int nb, struct spread_table *tab)
{
    const struct run_record *base = baselines[0];
    tab->baselines = baselines;
    tab->nb = nb;
    tab->baselines_spread = 0;
    tab->record = NULL;
    tab->spread = calloc((size_t)base->n + 1, sizeof *tab->spread);
    tab->bitwise = calloc((size_t)base->n + 1, 1);
    if (!tab->spread || !tab->bitwise) {
        spread_table_free(tab);
        return error_set(ST_RUN, "out of memory for the baselines' spreads");
    }
    for (int i = 0; i < base->n; i++) {
        tab->spread[i] = NAN;
        if (!envelope_in_scope(base->items[i].path))
            continue;
        int bitwise, st = tensor_spread(baselines, nb, &base->items[i], &tab->spread[i], &bitwise);
        if (st) {
            spread_table_free(tab);
            return st;
        }
        tab->bitwise[i] = (unsigned char)bitwise;
        tab->baselines_spread |= !bitwise;
    }
    tab->noisy_from = INT_MAX;
    return ST_OK;
}

/* 1 when the impl's own samples of a tensor (its run and re-runs, all
 * completed) are not all the same bits: the kernels behind it are not
 * deterministic, whatever the baselines happened to draw. */
static int samples_differ(const struct run_record *const *samples, int n, const char *path, int *differ)
{
    *differ = 0;
    const struct run_tensor *first = NULL;
    const struct run_record *first_run = NULL;
    struct tensor_hold hf = {0};
    int held = 0, st = ST_OK;
    for (int k = 0; k < n && !*differ && st == ST_OK; k++) {
        const struct run_tensor *t = samples[k]->outcome[0] ? NULL : run_record_find(samples[k], path);
        if (!t)
            continue;
        if (!first) {
            first = t;
            first_run = samples[k];
            continue;
        }
        if (run_tensors_same_object(first_run, first, samples[k], t))
            continue;
        struct tensor_hold ht;
        if (!held && (st = run_tensor_acquire(first_run, first, &hf)) == ST_OK)
            held = 1;
        if (st || (st = run_tensor_acquire(samples[k], t, &ht)))
            break;
        *differ = !host_tensors_bitwise_equal(&hf.t, &ht.t);
        run_tensor_release(&ht);
    }
    if (held)
        run_tensor_release(&hf);
    return st;
}

/* The step of "steps/<k>/...", 0 for anything else (final_params/...). */
static int step_of(const char *path)
{
    return strncmp(path, "steps/", 6) == 0 ? atoi(path + 6) : 0;
}

#define MAX_NOISE_STEPS 1024

/* The first step in which kernel noise shows: some tensor of it that the
 * baselines, or (where the baselines spread anywhere) the impl's own
 * samples, do not all draw alike. Training carries noise forward: every
 * later step's tensors and the final parameters are computed from it.
 * INT_MAX when none shows. */
int first_noisy_step(const struct spread_table *tab, const struct run_record *const *samples, int n_samples,
                     int *first)
{
    const struct run_record *base = tab->baselines[0];
    *first = INT_MAX;
    for (int i = 0; i < base->n; i++) {
        const struct run_tensor *ref = &base->items[i];
        int k = step_of(ref->path), differ = 0, st;
        if (k < 1 || k >= *first)
            continue;
        if (tab->bitwise[i] && tab->baselines_spread &&
            (st = samples_differ(samples, n_samples, ref->path, &differ)))
            return st;
        if (!tab->bitwise[i] || differ)
            *first = k;
    }
    return ST_OK;
}

/* Keeps the tensor's distance in res (judge.h tensor_distances): the
 * farthest RESULT_TENSORS_MAX, farthest first; a path seen in an earlier
 * attempt keeps the larger distance. */
static void record_distance(struct impl_result *res, const char *path, double distance, double spread, double limit,
                            int values)
{
    if (!res)
        return;
    struct tensor_distance *t = res->tensor_distances;
    int n = res->n_tensor_distances, at = -1;
    for (int k = 0; k < n && at < 0; k++)
        if (strcmp(t[k].path, path) == 0)
            at = k;
    if (at >= 0 && !(distance > t[at].scaled_ulp))
        return;
    if (at < 0) {
        res->tensors_differing++;
        if (n < RESULT_TENSORS_MAX)
            at = res->n_tensor_distances++;
        else if (distance > t[n - 1].scaled_ulp)
            at = n - 1; /* the nearest of those kept makes room */
        else
            return;
    }
    snprintf(t[at].path, sizeof t[at].path, "%s", path);
    t[at].scaled_ulp = distance;
    t[at].spread = spread;
    t[at].limit = limit;
    t[at].values = values;
    /* back into order, farthest first */
    for (; at > 0 && t[at].scaled_ulp > t[at - 1].scaled_ulp; at--) {
        struct tensor_distance tmp = t[at];
        t[at] = t[at - 1];
        t[at - 1] = tmp;
    }
}

/* check_envelope's work on one tensor pair, both held. */
static int envelope_tensor(const struct spread_table *tab, int i, const struct run_record *const *samples,
                           int n_samples, const struct host_tensor *ref_t,
                           const struct host_tensor *run_t, const char *path, struct envelope_check *out)
{
    if (host_tensors_bitwise_equal(ref_t, run_t))
        return ST_OK;
    struct tensor_diff d;
    int st = compare_tensors(ref_t, run_t, &d);
    if (st)
        return error_wrap(st, "%s", path);
    double spread = tab->spread[i], scale;
    int bitwise = tab->bitwise[i];
    /* Baselines that happened to agree prove nothing when the impl's own
     * samples of the tensor disagree and the baselines spread elsewhere
     * (the kernels are shown non-deterministic): an atomic reduction can
     * land alike in every baseline and differently in a checkpointed run.
     * The tensor then gets the least envelope, one ULP at its scale, so a
     * rounding-sized difference is noise there and a bug still is not.
     * Where no baseline ever spread, nothing shows noise: an impl whose
     * own runs disagree is flaky, and each attempt must match bitwise. */
    int differ = 0;
    if (bitwise && tab->baselines_spread && (st = samples_differ(samples, n_samples, path, &differ)))
        return st;
    if (bitwise && differ) {
        bitwise = 0;
        out->impl_varies++;
    }
    /* Nor do they downstream of a step where noise showed: this
     * tensor was computed from noisy state, however alike the few
     * baselines came out. */
    int k = step_of(path), noisy_from = tab->noisy_from;
    if (bitwise && noisy_from != INT_MAX && (k == 0 || k > noisy_from)) {
        bitwise = 0;
        out->downstream_of_noise++;
    }
    double distance = compare_scaled_distance(ref_t, run_t, &scale);
    /* A tensor whose baselines differ at all comes from non-deterministic
     * kernels: its envelope is at least one ULP at its scale, since
     * differences in its small elements are fractions of that and one
     * more sample can always land a little further out. */
    double envelope = fmax(spread, 1.0), ratio = distance / envelope;
    /* An integer tensor's distance is a difference of values (counts), not
     * a scaled ULP: it is judged against its envelope like any other, but
     * stays out of the run's figures in scaled ULP. */
    int counts = d.comparable && d.integer;
    if (!counts && (distance > out->max_scaled || isnan(distance)))
        out->max_scaled = isnan(distance) ? INFINITY : distance;
    if (bitwise) {
        out->bitwise_tensors_differ++;
    } else if (!counts && (ratio > out->worst_ratio || !out->worst_path[0])) {
        out->worst_ratio = ratio;
        out->worst_distance = distance;
        snprintf(out->worst_path, sizeof out->worst_path, "%s", path);
    }
    int within = !bitwise && d.comparable && (isinf(spread) || distance <= JUDGE_NOISE_MARGIN * envelope);
    record_distance(tab->record, path, isnan(distance) ? INFINITY : distance, spread,
                    bitwise ? 0 : isinf(spread) ? INFINITY : JUDGE_NOISE_MARGIN * envelope, counts);
    if (!within && !out->outside) {
        out->outside = 1;
        snprintf(out->path, sizeof out->path, "%s", path);
        out->distance = distance;
        out->spread = spread;
        out->scale = scale;
        out->baselines_bitwise = bitwise;
        out->diff = d;
    }
    return ST_OK;
}

/* Every in-scope tensor of run against baseline_0 and its envelope. A
 * tensor whose baselines agree bitwise must match bitwise; any other must
 * lie within JUDGE_NOISE_MARGIN times its envelope, max(spread, 1 ULP). */
int check_envelope(const struct spread_table *tab, const struct run_record *const *samples, int n_samples,
                   const struct run_record *run, struct envelope_check *out)
{
    memset(out, 0, sizeof *out);
    const struct run_record *base = tab->baselines[0];
    int st;
    for (int i = 0; i < base->n; i++) {
        const struct run_tensor *ref = &base->items[i], *t;
        if (!envelope_in_scope(ref->path) || !(t = run_record_find(run, ref->path)) ||
            run_tensors_same_object(base, ref, run, t))
            continue;
        struct tensor_hold hr, ht;
        if ((st = run_tensor_acquire(base, ref, &hr)))
            return st;
        if ((st = run_tensor_acquire(run, t, &ht))) {
            run_tensor_release(&hr);
            return st;
        }
        st = envelope_tensor(tab, i, samples, n_samples, &hr.t, &ht.t, ref->path, out);
        run_tensor_release(&hr);
        run_tensor_release(&ht);
        if (st)
            return st;
    }
    return ST_OK;
}
