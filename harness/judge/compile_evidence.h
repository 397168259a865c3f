/* compile_evidence: verdicts from what torch.compile's partitioner did to a
 * run's checkpoint, read from the compiler evidence the Python library
 * records as /runs/<run> attributes compile.* (docs/schema.md "torch.compile
 * evidence"; python/ckpt_verify/compile_evidence.py reads each number off
 * AOTAutograd's own joint, forward and backward graphs):
 *  - a run whose joint graphs carry checkpoint regions (ops tagged for
 *    recompute) and whose backward recomputes none of them: the partitioner
 *    dropped the recompute, MEMFAIL naming torch.compile, the tensors and
 *    bytes it saved for backward and the compiled baseline's;
 *  - a run with checkpoint regions whose activations saved for backward are
 *    no fewer bytes than its baseline's (the run's own family, when that
 *    baseline has the evidence): nothing is saved, MEMFAIL likewise;
 *  - a selective checkpoint's op tagged MUST_SAVE by its policy that the
 *    backward computes again: the policy is not held, MEMFAIL naming the
 *    count;
 *  - some regions recomputed and some dropped, bytes below the baseline's:
 *    a finding appended to the verdict;
 *  - otherwise the verdict stands and the reason adds the evidence;
 *  - the bytes the memory meter held at the end of forward, the run's and its
 *    baseline's, are appended beside the graphs' claim;
 *  - saved tensors measured by saved_tensors_hooks (compile.hooked_saved_*)
 *    that differ from the graphs' are a finding naming both.
 * Only PASS and NOISE can become MEMFAIL. A run without compile.ckpt_regions
 * (any other producer) is left as it is. */
#ifndef CKPT_COMPILE_EVIDENCE_H
#define CKPT_COMPILE_EVIDENCE_H

#include "judge.h"
#include "run_record.h"

/* Applies the rules above to res (a run already judged on its tensors);
 * base is the first baseline of the run's family. */
void compile_evidence_judge(const struct run_record *base, const struct run_record *run, struct impl_result *res);

#endif
