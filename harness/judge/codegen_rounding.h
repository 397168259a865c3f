/* codegen_rounding: a compiler's own rounding told apart from a checkpoint
 * bug (docs/compile.md, "The rounding rule"; docs/xla.md for XLA). A run
 * whose step ran code a compiler optimized (compile.codegen = 1: kernels
 * Inductor generated; 2: XLA's fused HLO) and whose tensors lie outside its
 * family's envelope is NOISE, not FAIL, when both hold:
 *  - its twin <run>_graphs, the same step with Inductor's partitioned
 *    graphs run op by op with ATen's kernels, is bitwise identical to the
 *    family's baseline run the same way (<family>_graphs_baseline_0): the
 *    checkpointed graphs compute exactly what the plain ones do, the
 *    recompute and any RNG replay included. For XLA the twin is the same
 *    traced HLO compiled without XLA's fusion pass, each instruction its
 *    own kernel;
 *  - every tensor of the run, and of each re-run, lies within
 *    JUDGE_NOISE_MARGIN x max(rho, 1) scaled ULP of <family>_baseline_0,
 *    rho being that tensor's distance from <family>_baseline_0 to
 *    <family>_graphs_baseline_0: the compiler's own rounding of the plain
 *    step.
 * Under Inductor a run whose graphs draw random numbers (compile.random_ops
 * > 0) is never rounding: Inductor's kernels draw them from a generator of
 * their own, so its kernels and its graphs op by op differ by more than
 * rounding. XLA's random bits are integer HLO, the same fused or not.
 * Otherwise the FAIL stands and its reason says which condition failed.
 * The envelope is measured from the baseline alone, never from the run:
 * a run far from its graphs is a run far from its baseline. */
#ifndef CKPT_CODEGEN_ROUNDING_H
#define CKPT_CODEGEN_ROUNDING_H

#include "judge.h"
#include "run_record.h"

/* compile.codegen: which compiler's optimized code a run ran. */
#define CODEGEN_INDUCTOR 1
#define CODEGEN_XLA 2

/* 1 when the rule concerns run: it and its family's first baseline base ran
 * the same compiler's optimized code (not a _vs_eager twin, whose family
 * mixes in the eager baselines), and it FAILed only for a tensor outside
 * its envelope. */
int codegen_rounding_applies(const struct run_record *base, const struct run_record *run,
                             const struct impl_result *res);

/* Applies the rule to res. samples[0] is the run, the rest its completed
 * re-runs; base is <family>_baseline_0; twin is <run>_graphs (NULL when the
 * report has none), twin_res its verdict, graphs_base the first baseline of
 * its family (NULL when missing). ST_OK, or an error reading a tensor. */
int codegen_rounding_judge(const struct run_record *base, const struct run_record *const *samples, int n_samples,
                           const struct run_record *twin, const struct impl_result *twin_res,
                           const struct run_record *graphs_base, struct impl_result *res);

#endif
