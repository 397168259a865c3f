/* recomputed_ops: the ideal cost of a run's recompute, from two recorded
 * runs alone: the baseline's own forward time for the very ops the run
 * reran ("ops.<op>.*" attributes, written by the training side's op_timing). */
#ifndef CKPT_RECOMPUTED_OPS_H
#define CKPT_RECOMPUTED_OPS_H

#include "run_record.h"

/* What the baseline `base` spent per step on the ops that `run` recomputed:
 * for each op, run's recompute calls times base's forward time per call.
 * 0 when run recomputed nothing; NAN when either record lacks the figures
 * (a file written before they existed, or a run whose marks failed). */
double recomputed_ops_ms(const struct run_record *base, const struct run_record *run);

#endif
