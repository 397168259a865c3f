/* runner: runs one case end to end — baseline twice (the noise floor),
 * then each impl, all from the same seed, parameters and inputs, for the
 * case's SGD steps; re-runs the baseline (up to noise_runs) before calling
 * anything a FAIL; decides each verdict with its reason and first
 * divergence; writes the case's HDF5 file (temporary name, then rename). */
#ifndef CKPT_RUNNER_H
#define CKPT_RUNNER_H

#include <stdint.h>

#include "case.h"

#define RESULT_TEXT_MAX 512

struct impl_result {
    char impl[CASE_WORD_MAX];
    enum verdict verdict;
    int expected;                 /* verdict allowed by the case */
    char reason[RESULT_TEXT_MAX];
    char first_divergence[RESULT_TEXT_MAX]; /* "step 1 grads/l0.weight [3, 5]" or "" */
    uint64_t max_ulp;
    double memory_saved;          /* 1 - peak(impl)/peak(baseline_0) */
    double overhead;              /* step time impl / the fastest baseline's */
    /* Bytes newly live since the step began (docs/schema.md "memory"):
     * peak over forward + backward, each phase's peak, what forward left
     * for backward, the gradients after backward. */
    double peak_bytes, end_forward_bytes, forward_peak_bytes, backward_peak_bytes, grad_bytes;
    double activation_peak_bytes; /* the peak of everything but gradients (runner.c activation_probe) */
    double predicted_end_forward_bytes; /* model_predict_saved_bytes for this impl's plan */
    double forward_ms, backward_ms, recompute_ms, step_ms; /* medians per step */
    int recomputes;
};

struct case_result {
    char name[CASE_NAME_MAX];
    char h5_path[1024];
    int n_results;
    struct impl_result results[CASE_MAX_IMPLS];
    uint64_t noise_floor_ulp;     /* max ULP over the baseline re-runs vs baseline_0 */
    int baseline_runs;            /* baselines run, 2 + extra noise runs */
    double baseline_peak_bytes;
    double baseline_end_forward_bytes, baseline_grad_bytes, baseline_activation_peak_bytes;
    double predicted_baseline_end_forward_bytes;     /* nothing checkpointed */
    double predicted_checkpointed_end_forward_bytes; /* the case's segments */
    double param_bytes;           /* all parameters (live before every step, not in the peaks) */
    /* The fastest baseline's medians, and (step + forward) / step: what
     * recomputing every layer once would cost, the reference for overhead. */
    double baseline_forward_ms, baseline_step_ms, ideal_overhead;
    double slowest_baseline_step_ms; /* with baseline_step_ms: the baselines' spread */
    int timed_steps;              /* steps per run behind the timing medians */
    struct ckpt_case definition;  /* the case as run (overrides applied) */
    int status;                   /* ST_OK, or the case could not run at all */
    char error[RESULT_TEXT_MAX];
};

struct run_settings {
    const char *out_dir;          /* existing directory */
    const char *git_rev;
    const char *harness_version;
    /* Steps timed per run for the timing medians (benchmarks): the case's
     * recorded steps, then unrecorded ones up to this many. 0: just the
     * recorded steps. */
    int repeats;
    int skip_h5;                  /* no HDF5 file (h5_path left empty) */
};

/* Runs c (already resolved: overrides applied by the caller). The result
 * holds one entry per impl; a failure of one impl is its ERROR verdict, not
 * a failure of the call. Returns non-OK only when the case cannot run or
 * its file cannot be written (result->error says why). */
int runner_run_case(const struct ckpt_case *c, const struct run_settings *s, struct case_result *result);

#endif
