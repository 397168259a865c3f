/* xla_evidence: verdicts from what XLA did to a run's recompute, read from
 * the compiler evidence the XLA frontend records under /runs/<run>/xla
 * (docs/schema.md "XLA compiler evidence"; python/ckpt_verify/xla_evidence.py
 * says how each number is taken from XLA's own HLO dump):
 *  - a region whose traced recompute left no op in the optimized program
 *    was merged into the forward (XLA's CSE): the gradients are right and
 *    nothing is saved, MEMFAIL naming the merge and the bytes;
 *  - a recompute that saves nothing (temp buffers no smaller than the
 *    baseline's) in a compiled step with no more instructions than the
 *    plain one was merged too (JAX's optimized HLO does not tell regions
 *    apart): MEMFAIL naming the merge and both instruction counts;
 *  - a recompute that survives while XLA's temp buffers are no smaller than
 *    the baseline's saves nothing either: MEMFAIL naming the bytes;
 *  - opt-barrier values beyond the recompute's inputs are a finding, with
 *    the bytes they hold, appended to the reason.
 * A run without these attributes (any other producer) is left as it is. */
#ifndef CKPT_XLA_EVIDENCE_H
#define CKPT_XLA_EVIDENCE_H

#include "judge.h"
#include "run_record.h"

/* Applies the rules above to res (a run already judged on its tensors);
 * only PASS and NOISE can become MEMFAIL. */
void xla_evidence_judge(const struct run_record *base, const struct run_record *run, struct impl_result *res);

#endif
