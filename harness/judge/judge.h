/* judge: verdicts from recorded runs alone, the one place they are decided.
 * Runs named baseline_* give every tensor its own noise envelope at the
 * tensor's scale; every other run is judged against baseline_0, and so is
 * each of its re-runs (<run>_rerun_<k>): every attempt must lie inside
 * every envelope, and a tensor the baselines agree on bitwise must match
 * bitwise unless the baselines show noise elsewhere. The runner judges
 * the runs it just made; `ckpt-verify judge` the runs of any file that
 * follows the schema, whoever wrote them. Pure C over run_records. */
#ifndef CKPT_JUDGE_H
#define CKPT_JUDGE_H

#include <stdint.h>

#include "case.h"
#include "run_record.h"

/* NOISE allows each tensor whose baselines differ this many times its own
 * envelope: the baselines' spread, at least one ULP, both measured at the
 * tensor's scale (compare_scaled_distance). Chosen from data (docs/noise.md,
 * scripts/noise_margin.py). */
#define JUDGE_NOISE_MARGIN 16.0

/* Timings count as stable when the slowest baseline's step is within this
 * factor of the fastest's. */
#define JUDGE_STABLE_TIMING_SPREAD 1.25
/* A run whose own slowest step took this many times its fastest paid a
 * one-time cost inside a step (a library's first call, a lazy import): its
 * median says nothing of the checkpoint, and no overhead is shown. */
#define JUDGE_MEANINGLESS_TIMING_SPREAD 10.0

/* The most tensors judging holds in memory at once (a baseline's and a
 * run's, and two samples while it checks whether the impl's own runs
 * agree): each stored tensor may load at most budget / this many bytes. */
#define JUDGE_TENSORS_HELD 4

/* A case that could not run at all: the error slot's message. */
#define RESULT_ERROR_MAX 2048

/* One tensor that differs from baseline_0, as the envelope judged it: its
 * distance at its scale (scaled ULP; INFINITY for NaN/Inf or a broken
 * scale), its baselines' spread, and the limit it was held to (0: it had
 * to match bitwise; INFINITY: no limit, the baselines themselves are
 * broken there). Over a run's re-runs, the largest distance of any. */
#define RESULT_TENSORS_MAX 32
struct tensor_distance {
    char path[RUN_PATH_MAX];
    double scaled_ulp, spread, limit;
    int values; /* an integer or bool tensor: the three are differences of values (counts), not ULPs */
};

struct impl_result {
    char impl[CASE_WORD_MAX * 2];
    char role[16];                /* the run's recorded role (run_record.h): "" a checkpoint claiming to be right */
    enum verdict verdict;
    int expected;                 /* verdict allowed by the case */
    unsigned expected_mask;       /* the verdicts the case allows the run (1u << verdict each) */
    /* A twin (run_record.h twin_of) its run's own verdict explains: not
     * judged, `verdict` kept as measured; reports show "n/j" for it. */
    int not_judged;
    /* A result's texts are heap texts (text.h), whole at any length, owned
     * by the result (impl_result_free): a verdict's reason joins its own
     * figures and findings with the run's message, warnings and memory
     * lists, and summary.json, JUnit, report.html and ckpt_verify's
     * Verdict.reason carry it whole. */
    struct text reason;
    struct text first_divergence; /* "steps/1/grads/l0.weight [3, 5] (...)" or "" */
    /* The run's op_log when the checkpoint's own check failed (run_record.h):
     * forward's and recompute's ops side by side, several lines; or "". */
    struct text op_log;
    uint64_t max_ulp;             /* raw element-wise max over every tensor */
    double max_scaled_ulp;        /* max over tensors of the distance at the tensor's scale */
    double noise_ratio;           /* max over differing tensors whose baselines differ of distance / envelope */
    int bitwise_tensors_differ;   /* differing tensors whose baselines agree bitwise (each one is outside) */
    int outside_envelope;         /* FAIL because a tensor lies outside its envelope (more samples may help) */
    /* FAIL from a run check alone (run_checks.h: hook counts, leaks) while
     * every tensor PASSed or was NOISE: the run did the same work, so its
     * memory and time figures are kept. */
    int gradients_right;
    /* A FAIL decided before any distance: "missing tensor" (a tensor on
     * one side only) or "dtype/shape" (a tensor that cannot be compared);
     * "" otherwise. Reports show it where the distance would stand. */
    char decided_by[16];
    /* Input gradients only the run computes (compare.h run_diff), not
     * compared: how many, and the first; said in the reason and the summary. */
    int input_grads_only_in_run;
    char first_input_grad_only_in_run[160];
    double memory_saved;          /* 1 - peak(impl)/peak(baseline_0) */
    double end_forward_saved;     /* 1 - held at end of forward (impl / baseline_0) */
    double overhead;              /* step time impl / the fastest baseline's */
    /* The overhead can be trusted: the baselines' step times, and the
     * run's own, agree within JUDGE_STABLE_TIMING_SPREAD, and it is not
     * below 1 (a checkpoint never speeds a step up); timing_note says
     * which failed, "" when none did. Reports mark an unstable ratio '?'. */
    int timing_stable;
    char timing_note[160];
    /* The overhead is left out (NAN): the run's own steps spread past
     * JUDGE_MEANINGLESS_TIMING_SPREAD; timing_note says by how much. */
    int overhead_withheld;
    /* The references those ratios divide by, from the run's own baseline
     * family (an external producer's runs: its own baselines): the fastest
     * baseline's name and step time, and its _0 run's peak and held bytes. */
    char overhead_baseline[64];
    double baseline_step_ms, baseline_peak_bytes, baseline_end_forward_bytes;
    /* Bytes newly live since the step began (docs/schema.md "memory"):
     * peak over forward + backward, each phase's peak, what forward left
     * for backward, the gradients after backward. */
    double peak_bytes, end_forward_bytes, forward_peak_bytes, backward_peak_bytes, grad_bytes;
    double activation_peak_bytes; /* the peak of everything but gradients (runner.c activation_probe) */
    double predicted_end_forward_bytes; /* model_predict_saved_bytes for this impl's plan */
    double forward_ms, backward_ms, recompute_ms, step_ms; /* medians per step */
    /* The fastest baseline's forward time for the ops this run's recomputes
     * reran (op_timing.h): what recomputing costs at the baseline's speed.
     * NAN where ops have no times (older files, failed marks). */
    double recomputed_ops_ms;
    int recomputes;
    /* A user's run (python/ckpt_verify, docs/memory.md "A user's
     * checkpoint"): the step judged, what it held at the end of forward
     * there against its statement, the ops its backwards re-ran (every
     * recorded step), and the tensors it holds beyond the baseline and as
     * state; NAN / -1 / "" for any other run. memory_judged: "judged",
     * "control", "not judged: <why>", or "" (not a user's run). */
    double stated_end_forward_bytes, judged_held_bytes;
    int memory_step, memory_recomputed_ops;
    struct text memory_judged;
    struct text memory_extra, memory_state;
    struct text memory_statement;
    /* Every tensor that differs from baseline_0 (tensors_differing of them,
     * counted per path over the attempts), the RESULT_TENSORS_MAX farthest
     * kept, farthest first: what a report shows per tensor and step. Filled
     * where the envelope is computed (judge.c), so no reader recomputes it. */
    int tensors_differing, n_tensor_distances;
    struct tensor_distance tensor_distances[RESULT_TENSORS_MAX];
};

struct case_result {
    char name[CASE_NAME_MAX];
    char h5_path[1024];
    int n_results;
    struct impl_result results[CASE_MAX_IMPLS * 2];
    uint64_t noise_floor_ulp;     /* raw max ULP over the baselines vs baseline_0 */
    double noise_floor_scaled;    /* max over tensors of the baselines' spread at the tensor's scale */
    char noise_floor_path[RUN_PATH_MAX];
    int baseline_runs;            /* baselines run, 2 + extra noise runs */
    double baseline_peak_bytes;
    double baseline_end_forward_bytes, baseline_grad_bytes, baseline_activation_peak_bytes;
    double one_time_bytes;        /* left allocated by the process's warm-up (library workspaces) */
    double predicted_baseline_end_forward_bytes;     /* nothing checkpointed */
    double predicted_checkpointed_end_forward_bytes; /* the case's segments */
    double param_bytes;           /* all parameters (live before every step, not in the peaks) */
    /* The fastest baseline's medians, and (step + forward) / step: what
     * recomputing every layer once would cost, the reference for overhead. */
    double baseline_forward_ms, baseline_step_ms, ideal_overhead;
    double slowest_baseline_step_ms; /* with baseline_step_ms: the baselines' spread */
    int timed_steps;              /* steps per run behind the timing medians */
    struct ckpt_case definition;  /* the case as run (overrides applied) */
    /* 1 when the judged file names another producer (its root `producer`
     * attribute: python/ckpt_verify, a torch script): its /case describes
     * its own model, so reports show it as stored, not `definition` (the
     * harness's defaults filled in). */
    int definition_from_producer;
    int status;                   /* ST_OK, or the case could not run at all */
    char error[RESULT_ERROR_MAX];
};

/* Frees a result's texts (zeroed after; a zeroed result needs none). */
void impl_result_free(struct impl_result *r);
/* Frees every result's texts (out->n_results of them). */
void case_result_free(struct case_result *r);
/* ST_OK, or ST_INTERNAL when composing one of r's texts ran out of memory. */
int impl_result_check(const struct impl_result *r);

/* 1 for "baseline_<k>" or "<prefix>_baseline_<k>": the runs that set an
 * envelope. A run is judged against the family its `baselines` attribute
 * names (default "baseline": baseline_0 is its reference); another
 * producer whose plain runs compute differently (torch's unfused kernels)
 * brings its own family, e.g. torch_baseline_0, torch_baseline_1. */
int judge_is_baseline(const char *run);
int judge_is_baseline_of(const char *run, const char *family);
/* 1 if `run` is "<of>_rerun_<k>". */
int judge_is_rerun_of(const char *run, const char *of);

/* The verdict of the run `name` among runs[0..n) (baseline_0 among them):
 * PASS, NOISE, FAIL, MEMFAIL, ERROR or NOT_OBSERVABLE, with its reason,
 * first divergence, expectation and memory and time figures. ST_INPUT when
 * there is no baseline_0 or no such run. */
int judge_run(const struct ckpt_case *c, const struct run_record *runs, int n, const char *name,
              struct impl_result *out);

/* Every judged run of the case into out (the case-wide figures too):
 * `order` names runs to judge first, in that order (NULL: none); every
 * other run that is neither a baseline nor a re-run follows in runs order. */
int judge_case(const struct ckpt_case *c, const struct run_record *runs, int n,
               const char (*order)[CASE_WORD_MAX], int n_order, struct case_result *out);

/* Loads a report file (any producer's) and judges it: the case from /case
 * (defaults where absent; unknown keys ignored), every run under /runs.
 * ST_INPUT, naming the file and the path inside it, for a file that is not
 * a schema file, has no baseline_0, holds a malformed run or a baseline
 * that stopped short, or a dataset whose crc32 is not its data's (every
 * stored object is read at least once for it). A run /case names (impls,
 * expect, the producer's `runs`) that the file lacks, or any run that
 * stopped short of its reference (a step or a final parameter missing),
 * is an ERROR result, never expected; a file with nothing to judge leaves
 * out->n_results 0 and says why in out->error (docs/schema.md, "What
 * ckpt-verify judge reads"). *budget (NULL: H5STORE_READ_LIMIT) bounds
 * what one stored tensor may load (a quarter of it each, JUDGE_TENSORS_HELD).
 * judge_report reads everything through one open report (h5store.h), the
 * runs holding that handle while they are judged; judge_file opens path
 * once for it. */
struct h5report;
int judge_report(struct h5report *rep, uint64_t *budget, struct case_result *out);
int judge_file(const char *path, uint64_t *budget, struct case_result *out);

#endif
