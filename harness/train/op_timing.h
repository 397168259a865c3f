/* op_timing: per kind of op, the time a run's forward spends in it and how
 * many calls of it a checkpoint's recompute reran (runner.c feeds it from
 * the tape's op observer), so that the ideal cost of a recompute is the
 * baseline's own time for the very ops it reran (judge: recomputed_ops_ms).
 * An op's time is the interval between its mark and the previous one on the
 * device's timeline (aten_timer: the host clock on the CPU, CUDA events on
 * the device's stream on a GPU), read when forward ends. */
#ifndef CKPT_OP_TIMING_H
#define CKPT_OP_TIMING_H

#include "aten/aten.h"
#include "run_record.h"

#define OP_TIMING_MAX_KINDS 32
#define OP_TIMING_MAX_STEPS 64   /* steps whose per-op times are kept for the median */
#define OP_TIMING_MAX_MARKS 4096 /* ops timed per forward; later ones are only counted */

enum op_timing_phase { OP_PHASE_IDLE = 0, OP_PHASE_FORWARD, OP_PHASE_RECOMPUTE };

struct op_timing {
    int device;
    int n_kinds;
    char name[OP_TIMING_MAX_KINDS][32];
    double step_ms[OP_TIMING_MAX_KINDS][OP_TIMING_MAX_STEPS]; /* per forward (step) */
    double forward_calls[OP_TIMING_MAX_KINDS];
    double recompute_calls[OP_TIMING_MAX_KINDS]; /* ops run during backward: recomputes */
    int forwards;                                /* forward phases begun (steps) */
    int failed;                                  /* a mark or read failed: no times recorded */
    enum op_timing_phase phase;
    aten_timer *timer;                           /* this forward's marks: start, then one per op */
    int n_marks;
    unsigned char mark_kind[OP_TIMING_MAX_MARKS];
};

/* Empty, for a run on `device`. */
void op_timing_init(struct op_timing *t, int device);
void op_timing_free(struct op_timing *t);
/* A forward begins (the first op's interval starts now), a backward begins
 * (ops run from now on are recomputes: counted, not timed), or neither.
 * Leaving a forward reads its marks (on CUDA this waits for the device). */
void op_timing_phase(struct op_timing *t, enum op_timing_phase phase);
/* One op finished (called by the op observer). Kinds past
 * OP_TIMING_MAX_KINDS are not tracked. */
void op_timing_note(struct op_timing *t, const char *op);
/* Per step, on r: "ops.<op>.forward_calls", "ops.<op>.recompute_calls" and
 * "ops.<op>.forward_ms" (the median over the steps: one disturbed step must
 * not move it) for every kind seen; no times when a mark failed. */
int op_timing_record(const struct op_timing *t, struct run_record *r);

#endif
