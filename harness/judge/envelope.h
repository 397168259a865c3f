/* envelope: each tensor of a run against the envelope its plain baselines
 * draw. A tensor whose baselines agree bitwise must match bitwise; any other
 * must lie within JUDGE_NOISE_MARGIN x max(spread, 1 ULP) at its scale. The
 * baselines' spreads are computed once per judged run (spread_table) and
 * read by the checks of the run, of its re-runs and of the first noisy step. */
#ifndef CKPT_ENVELOPE_H
#define CKPT_ENVELOPE_H

#include "compare.h"
#include "judge.h"
#include "run_record.h"

/* The tensors the judge compares: steps/ and final_params/. */
int envelope_in_scope(const char *path);

/* Where a run stands against the per-tensor envelope. */
struct envelope_check {
    int outside;                   /* some tensor lies outside its envelope */
    char path[RUN_PATH_MAX];       /* the first such tensor, in recorded order */
    double distance, spread, scale; /* its distance and spread at its scale, max |baseline_0| */
    int baselines_bitwise;         /* its baselines agree bitwise */
    struct tensor_diff diff;       /* its element-wise comparison with baseline_0 */
    double max_scaled;             /* over every differing tensor */
    int bitwise_tensors_differ;    /* differing tensors whose baselines agree bitwise */
    int impl_varies;               /* tensors the baselines drew alike and the impl's own samples did not */
    int downstream_of_noise;       /* tensors the baselines drew alike, computed after noise showed */
    double worst_ratio;            /* distance / envelope over differing tensors whose baselines differ */
    double worst_distance;         /* that tensor's distance at its scale */
    char worst_path[RUN_PATH_MAX];
};

/* Every in-scope tensor's spread over the baselines, in baseline_0's
 * order, computed once per judged run: the envelope checks of the run and
 * of each re-run, and the search for the first noisy step, all read it. */
struct spread_table {
    const struct run_record *const *baselines;
    int nb;
    double *spread;          /* per item of baselines[0]; NAN: out of scope */
    unsigned char *bitwise;
    /* Some in-scope tensor's baselines differ: the plain runs themselves
     * show that this case's kernels are not deterministic. Only then may
     * the impl's own samples disagreeing count as kernel noise; where the
     * plain runs never spread, an impl that varies is a flaky bug. */
    int baselines_spread;
    int noisy_from;          /* first_noisy_step over the judged run's attempts */
    struct impl_result *record; /* where each differing tensor's distance goes (NULL: nowhere) */
};

/* ST_INPUT naming a tensor the baselines do not all hold alike. */
int spread_table_build(const struct run_record *const *baselines, int nb, struct spread_table *tab);
void spread_table_free(struct spread_table *tab);

/* The first step in which kernel noise shows (INT_MAX when none does). */
int first_noisy_step(const struct spread_table *tab, const struct run_record *const *samples, int n_samples,
                     int *first);

/* Every in-scope tensor of run against baseline_0 and its envelope. */
int check_envelope(const struct spread_table *tab, const struct run_record *const *samples, int n_samples,
                   const struct run_record *run, struct envelope_check *out);

#endif
