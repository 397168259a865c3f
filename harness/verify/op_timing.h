/* op_timing: per kind of op, the wall time a run's forward spends in it and
 * how many calls of it a checkpoint's recompute reran (runner.c feeds it
 * from the tape's op observer), so that the ideal cost of a recompute is the
 * baseline's own time for the very ops it reran (judge: recomputed_ops_ms).
 * Times are intervals between consecutive ops on the host clock: right where
 * ops run synchronously (CPU); on CUDA only the call counts are recorded. */
#ifndef CKPT_OP_TIMING_H
#define CKPT_OP_TIMING_H

#include "run_record.h"

#define OP_TIMING_MAX_KINDS 32
#define OP_TIMING_MAX_STEPS 64 /* steps whose per-op times are kept for the median */

enum op_timing_phase { OP_PHASE_IDLE = 0, OP_PHASE_FORWARD, OP_PHASE_RECOMPUTE };

struct op_timing {
    int n_kinds;
    char name[OP_TIMING_MAX_KINDS][32];
    double step_ms[OP_TIMING_MAX_KINDS][OP_TIMING_MAX_STEPS]; /* per forward (step) */
    double forward_calls[OP_TIMING_MAX_KINDS];
    double recompute_calls[OP_TIMING_MAX_KINDS]; /* ops run during backward: recomputes */
    int forwards;                           /* forward phases begun (steps) */
    enum op_timing_phase phase;
    double mark_ms;                         /* host clock at the previous op (or phase start) */
};

/* A forward begins (its first op's interval starts now), a backward begins
 * (ops run from now on are recomputes: counted, not timed), or neither. */
void op_timing_phase(struct op_timing *t, enum op_timing_phase phase);
/* One op finished (called by the op observer). Kinds past
 * OP_TIMING_MAX_KINDS are not tracked. */
void op_timing_note(struct op_timing *t, const char *op);
/* Per step, on r: "ops.<op>.forward_calls" and "ops.<op>.recompute_calls"
 * for every kind seen, and "ops.<op>.forward_ms" (the median over the
 * steps: one disturbed step must not move it) when with_times. */
int op_timing_record(const struct op_timing *t, struct run_record *r, int with_times);
/* What the baseline `base` spent per step on the ops that `run` recomputed:
 * for each op, run's recompute calls times base's forward time per call.
 * 0 when run recomputed nothing; NAN when either record lacks the figures
 * (no per-op times, as on CUDA, or a file written before they existed). */
double op_timing_recomputed_ms(const struct run_record *base, const struct run_record *run);

#endif
