/* step_backward: one training step's backward through the case's API
 * (loss.backward(), autograd.grad, backward(inputs=), or twice with
 * retain_graph; case.h enum backward_api), with a gradient hook on every
 * parameter that counts its fires in each backward call, as DDP's
 * per-parameter hooks would see them. The counts are recorded with the run
 * (checks/hook_fires/<name>) for run_checks to judge. */
#ifndef CKPT_STEP_BACKWARD_H
#define CKPT_STEP_BACKWARD_H

#include <stdint.h>

#include "case.h"
#include "run_record.h"
#include "tape.h"

struct hook_counts {
    int n_params, steps, calls; /* calls: backward calls per step */
    struct var **params;        /* borrowed; hooks registered on each */
    char (*names)[VAR_NAME_MAX];
    int64_t *fires;             /* [steps][calls][n_params] */
    int current;                /* slot (step - 1) * calls + call; -1: not counting */
};

/* Registers a counting hook on each of params[0..n) (they must outlive
 * the counts' use, as the run's leaves do). */
int hook_counts_init(struct hook_counts *h, struct var **params, int n_params, int steps, enum backward_api api);
void hook_counts_free(struct hook_counts *h);

/* The backward of step `step` from loss under api, over the parameters
 * and the input x (skipped when it needs no grad): afterwards each that got
 * a gradient holds it in ->grad. Steps beyond the counts' steps
 * (timing-only repeats) are not counted; h may be NULL. */
int step_backward(enum backward_api api, struct var *loss, struct var *const *params, int n_params, struct var *x,
                  struct hook_counts *h, int step);

/* checks/hook_fires/<name>: int64 [steps, calls] per parameter. */
int hook_counts_record(const struct hook_counts *h, struct run_record *rec);

#endif
