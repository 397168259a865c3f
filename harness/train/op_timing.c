#include "op_timing.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

void op_timing_init(struct op_timing *t, int device)
{
    memset(t, 0, sizeof *t);
    t->device = device;
}

void op_timing_free(struct op_timing *t)
{
    aten_timer_free(t->timer);
    t->timer = NULL;
    t->n_marks = 0;
}

static int kind_of(struct op_timing *t, const char *op)
{
    for (int i = 0; i < t->n_kinds; i++)
        if (strcmp(t->name[i], op) == 0)
            return i;
    if (t->n_kinds == OP_TIMING_MAX_KINDS || strlen(op) >= sizeof t->name[0])
        return -1;
    snprintf(t->name[t->n_kinds], sizeof t->name[0], "%s", op);
    return t->n_kinds++;
}

/* A failed mark or read leaves the run without per-op times; an observer
 * cannot return a status, and the step itself is not at fault. */
static void timing_failed(struct op_timing *t)
{
    t->failed = 1;
    error_clear();
}

/* The forward's marks into this step's per-op times. */
static void read_forward(struct op_timing *t)
{
    int step = t->forwards - 1;
    for (int i = 1; i <= t->n_marks && !t->failed; i++) {
        double ms;
        if (aten_timer_ms(t->timer, i - 1, i, &ms)) {
            timing_failed(t);
            break;
        }
        if (step < OP_TIMING_MAX_STEPS && t->mark_kind[i - 1] < OP_TIMING_MAX_KINDS)
            t->step_ms[t->mark_kind[i - 1]][step] += ms;
    }
    op_timing_free(t);
}

void op_timing_phase(struct op_timing *t, enum op_timing_phase phase)
{
    if (t->phase == OP_PHASE_FORWARD)
        read_forward(t);
    t->phase = phase;
    if (phase != OP_PHASE_FORWARD)
        return;
    t->forwards++;
    if (!t->failed && (aten_timer_create(&t->timer, t->device) || aten_timer_mark(t->timer)))
        timing_failed(t);
}

void op_timing_note(struct op_timing *t, const char *op)
{
    if (t->phase == OP_PHASE_IDLE || !op)
        return;
    int k = kind_of(t, op);
    if (k < 0)
        return;
    if (t->phase == OP_PHASE_RECOMPUTE) {
        t->recompute_calls[k] += 1;
        return;
    }
    t->forward_calls[k] += 1;
    if (t->failed || t->n_marks == OP_TIMING_MAX_MARKS)
        return;
    if (aten_timer_mark(t->timer)) {
        timing_failed(t);
        return;
    }
    t->mark_kind[t->n_marks++] = (unsigned char)k;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median_ms(const double *per_step, int n)
{
    double v[OP_TIMING_MAX_STEPS];
    memcpy(v, per_step, sizeof(double) * (size_t)n);
    qsort(v, (size_t)n, sizeof v[0], compare_doubles);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int op_timing_record(const struct op_timing *t, struct run_record *r)
{
    double steps = t->forwards > 0 ? t->forwards : 1;
    char key[RUN_ATTR_KEY_MAX];
    int st = 0;
    for (int i = 0; i < t->n_kinds && !st; i++) {
        snprintf(key, sizeof key, "ops.%s.forward_calls", t->name[i]);
        st = run_record_set_attr(r, key, t->forward_calls[i] / steps);
        snprintf(key, sizeof key, "ops.%s.recompute_calls", t->name[i]);
        if (!st)
            st = run_record_set_attr(r, key, t->recompute_calls[i] / steps);
        snprintf(key, sizeof key, "ops.%s.forward_ms", t->name[i]);
        if (!st && !t->failed && t->forwards > 0)
            st = run_record_set_attr(
                r, key, median_ms(t->step_ms[i], t->forwards < OP_TIMING_MAX_STEPS ? t->forwards : OP_TIMING_MAX_STEPS));
    }
    return st;
}
