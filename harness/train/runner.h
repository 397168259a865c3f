/* runner: runs one case end to end — an unrecorded warm-up, baseline twice
 * (the noise envelope), then each impl, all from the same seed, parameters
 * and inputs, for the case's SGD steps; re-runs the baseline and then the
 * impl (up to noise_runs each) before a difference is called FAIL; has
 * judge decide every verdict from the runs it made; writes the case's HDF5
 * file (temporary name, then rename). */
#ifndef CKPT_RUNNER_H
#define CKPT_RUNNER_H

#include <stdint.h>

#include "case.h"
#include "judge.h"

struct run_settings {
    const char *out_dir;          /* existing directory */
    const char *git_rev;
    const char *harness_version;
    /* Steps timed per run for the timing medians (benchmarks): the case's
     * recorded steps, then unrecorded ones up to this many. 0: just the
     * recorded steps. */
    int repeats;
    int skip_h5;                  /* no HDF5 file (h5_path left empty) */
    /* Intra-op threads of a case that names none (thread_policy.h): the
     * process's count at start (0: the count libtorch has now), and whether
     * a case too small to use them runs on one (0 when the caller pinned
     * the count with OMP_NUM_THREADS, and for benchmarks). */
    int default_threads;
    int fit_threads_to_size;
    /* Called as each run of the case starts (the CLI's progress line), or NULL. */
    void (*run_started)(void *ctx, const char *case_name, const char *run);
    void *run_started_ctx;
};

/* Runs c (already resolved: overrides applied by the caller). The result
 * holds one entry per impl; a failure of one impl is its ERROR verdict, not
 * a failure of the call. Returns non-OK only when the case cannot run or
 * its file cannot be written (result->error says why). */
int runner_run_case(const struct ckpt_case *c, const struct run_settings *s, struct case_result *result);

#endif
