/* bench: `ckpt-verify bench`, the memory and time benchmark. Runs the cases
 * labelled `bench` (or `bench_quick` with --quick) from
 * cases/bench/memory.ini — outside the nightly suite — with every run timed over several steps
 * (median), then measures the figures checkpointing promises against
 * their targets and prints them:
 *
 *   - time overhead of each impl vs the ideal (baseline + one forward) /
 *     baseline measured on the same case: overhead <= 1.10 x ideal;
 *   - bytes held at the end of forward vs model_predict_saved_bytes:
 *     within 5%;
 *   - at segments = sqrt(L), how the activation part of the peak (the
 *     peak of live bytes minus the gradients held at the time, see
 *     runner.c activation_probe; peak minus all gradient bytes is printed
 *     too) grows with depth: the exponent k of a
 *     least-squares fit of log bytes on log L, expected 0.4 <= k <= 0.6.
 *
 * Writes summary.json to the output directory (so `ckpt-verify plot` draws
 * it) and, with keep_h5, each case's HDF5 file. The quick mode is for CI: a
 * few seconds, and its time target is reported but not enforced, because
 * millisecond steps on a shared machine time noise, not checkpointing. */
#ifndef CKPT_BENCH_H
#define CKPT_BENCH_H

#include <stdio.h>

struct bench_options {
    const char *cases_path; /* file or directory (default: cases/bench/memory.ini) */
    const char *out_dir;    /* NULL: reports/bench-<UTC timestamp> */
    int quick;              /* label bench_quick instead of bench */
    int repeats;            /* timed steps per run (0: 5, or 3 when quick) */
    int keep_h5;            /* also write each case's HDF5 file */
    const char *device;     /* NULL: as the cases say; else every case runs there (cuda:N: bench_gpu cases) */
};

/* `ckpt-verify bench --help` (the CLI parses the flags, harness/cli/bench.c). */
void bench_usage(FILE *out);

/* Runs the benchmark (the output directory must exist; aten_init done).
 * *targets_met: 1 when every enforced target holds and every verdict is
 * the expected one. Returns non-OK only when it could not run. */
int bench_run(const struct bench_options *o, FILE *out, int *targets_met);

struct case_result;
struct impl_result;
struct ckpt_case;
/* The ideal overhead an impl's run is held to: the case's (baseline + one
 * forward) / baseline, or for an impl with a policy (selective) (baseline +
 * the baseline's time for the ops its recompute reran) / baseline (NAN
 * where ops have no times). */
double bench_impl_ideal(const struct case_result *c, const struct impl_result *x);
/* The smallest seq at which the model's prediction has a selective
 * attention_core checkpoint, segmented as c is, hold less than half the
 * baseline's bytes at the end of forward (c otherwise as it is); 0 when
 * none up to 65536, -1 for a model without attention. */
int bench_attention_core_crossing(const struct ckpt_case *c);

#endif
