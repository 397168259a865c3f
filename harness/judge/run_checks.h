/* run_checks: what a run must keep true beyond its tensors, judged from its
 * record alone (so `judge` decides from the file what the runner decided):
 *  - every parameter's gradient hook fired in each backward call as often
 *    as the reference's (its baseline's) did, exactly once where the
 *    reference records no count (checks/hook_fires/<name>, int64
 *    [steps, calls]; a distributed run's ranks/<r>/checks/hook_fires/<name>
 *    against the same rank's): a plain step that backwards a parameter's
 *    gradient twice fires it twice, and a checkpoint must match that;
 *  - every step began with the live allocator bytes step 1 began with
 *    (checks/step_start_bytes, int64 [steps]): nothing leaks across steps
 *    (a user's model: no growth beyond the reference's that continues to
 *    the last step, run_checks_leak_undecided).
 * A record without these datasets (another producer's) passes them. */
#ifndef CKPT_RUN_CHECKS_H
#define CKPT_RUN_CHECKS_H

#include <stddef.h>
#include <stdint.h>

#include "run_record.h"

#define RUN_CHECKS_HOOK_PREFIX "checks/hook_fires/"
#define RUN_CHECKS_START_BYTES "checks/step_start_bytes"

/* checks/step_start_bytes from bytes[0..steps). */
int run_checks_record_start_bytes(struct run_record *rec, const int64_t *bytes, int steps);

/* *violated = 1 with the reason (naming the parameter, the step and the
 * count, or the step and the bytes) and where (the dataset) when a check
 * fails; the first failure in step order, hooks before bytes within a
 * step. Each hook must fire as often as in reference for the same step
 * and call (reference NULL, or a count it lacks: exactly once); the reason
 * names both counts and what a differing count breaks (gradient-changing
 * hooks, DDP without static_graph). Each step's start bytes must exceed
 * step 1's by what reference's did (NULL: by nothing), so a model that
 * allocates lazily in its first steps, baseline and all, is no leak; a
 * run checked against itself passes the byte rule. ST_INPUT naming the
 * dataset when one is not int64 of the documented shape. */
int run_checks_judge(const struct run_record *r, const struct run_record *reference, int *violated, char *reason,
                     size_t reason_len, char *where, size_t where_len);

/* A user's run (no prediction): a leak is growth beyond the reference's
 * that continues to the end, on each of the last two step starts; state
 * that fills over a few steps and then holds still is none. When the last
 * step start grew but too few steps ran to tell which (fewer than 3, or
 * growth at the last start alone), writes that into note and returns 1;
 * else 0 and note is "". */
int run_checks_leak_undecided(const struct run_record *r, const struct run_record *reference, char *note,
                              size_t note_len);

#endif
