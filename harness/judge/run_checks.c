#include "run_checks.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "run_tensors.h"

int run_checks_record_start_bytes(struct run_record *rec, const int64_t *bytes, int steps)
{
    struct host_tensor t;
    int64_t shape[1] = {steps};
    int st = host_tensor_alloc(&t, DT_I64, 1, shape);
    if (st)
        return st;
    memcpy(t.data, bytes, (size_t)steps * sizeof *bytes);
    st = run_record_add(rec, RUN_CHECKS_START_BYTES, &t);
    host_tensor_free(&t);
    return st;
}

static int check_int64(const struct run_record *r, const struct run_tensor *t, int ndim)
{
    if (t->t.dtype != DT_I64 || t->t.ndim != ndim || t->t.numel == 0)
        return error_set(ST_INPUT, "/runs/%s/%s: expected a non-empty int64 dataset of rank %d", r->name, t->path,
                         ndim);
    return ST_OK;
}

/* The parameter a hook count is of, or NULL for a dataset that is none:
 * checks/hook_fires/<name>, or ranks/<r>/checks/hook_fires/<name> (each
 * rank's own count in a distributed run, judged against the same rank of
 * its baseline); *rank is r, or -1 for the run's own. */
static const char *hook_param(const char *path, int *rank)
{
    size_t prefix = strlen(RUN_CHECKS_HOOK_PREFIX);
    *rank = -1;
    if (strncmp(path, "ranks/", 6) == 0) {
        const char *p = path + 6;
        size_t digits = strspn(p, "0123456789");
        if (digits == 0 || digits > 6 || p[digits] != '/')
            return NULL;
        *rank = atoi(p);
        path = p + digits + 1;
    }
    return strncmp(path, RUN_CHECKS_HOOK_PREFIX, prefix) == 0 ? path + prefix : NULL;
}

/* What a parameter's hook firing other than the reference's count breaks
 * beyond the gradients (which the judge has found right when it asks). */
static const char *hook_consequence(int64_t fired, int64_t expected)
{
    if (fired > expected)
        return "what hangs on it runs more often than in the plain step (a gradient-scaling register_hook "
               "scales again; DDP without static_graph=True marks the parameter ready twice, an error)";
    return "what hangs on it runs less often than in the plain step (a gradient-scaling register_hook misses a "
           "pass; DDP without static_graph=True waits for a ready mark that never comes)";
}

/* The first hook count at `step` (1-based) other than the reference's
 * count for the same parameter, step and call, or other than 1 where the
 * reference records none; *violated stays 0 when none. */
static int hook_violation(const struct run_record *r, const struct run_record *reference, int step, int *violated,
                          char *reason, size_t reason_len, char *where, size_t where_len)
{
    for (int i = 0; i < r->n; i++) {
        const struct run_tensor *t = &r->items[i], *rt = NULL;
        int rank;
        const char *param = hook_param(t->path, &rank);
        if (!param)
            continue;
        char on[32] = "";
        if (rank >= 0)
            snprintf(on, sizeof on, " on rank %d", rank);
        int st = check_int64(r, t, 2);
        if (st)
            return st;
        if (reference && (rt = run_record_find(reference, t->path)) == t)
            continue; /* a run against itself: its own counts are the reference */
        if (rt && (st = check_int64(reference, rt, 2)))
            return st;
        int64_t steps = t->t.shape[0], calls = t->t.shape[1];
        if (step > steps)
            continue;
        struct tensor_hold h, hr = {0};
        if ((st = run_tensor_acquire(r, t, &h)))
            return st;
        if (rt && (st = run_tensor_acquire(reference, rt, &hr))) {
            run_tensor_release(&h);
            return st;
        }
        const int64_t *fires = h.t.data, *ref = rt ? hr.t.data : NULL;
        int64_t ref_calls = rt ? rt->t.shape[1] : 0;
        for (int64_t call = 0; call < calls && !*violated; call++) {
            int has_ref = rt && step <= rt->t.shape[0] && call < ref_calls;
            int64_t n = fires[(step - 1) * calls + call], expected = has_ref ? ref[(step - 1) * ref_calls + call] : 1;
            if (n == expected)
                continue;
            *violated = 1;
            if (has_ref)
                snprintf(reason, reason_len,
                         "the gradient hook of parameter %s fired %" PRId64 " time(s)%s in backward call %" PRId64
                         " of step %d (%" PRId64 " call(s) per step), where %s's fired %" PRId64 "%s: %s",
                         param, n, on, call + 1, step, calls, reference->name, expected, on,
                         hook_consequence(n, expected));
            else if (reference)
                snprintf(reason, reason_len,
                         "the gradient hook of parameter %s fired %" PRId64 " time(s)%s in backward call %" PRId64
                         " of step %d (%" PRId64 " call(s) per step); %s records no count for it, so it must fire "
                         "exactly once per backward: %s",
                         param, n, on, call + 1, step, calls, reference->name, hook_consequence(n, expected));
            else
                snprintf(reason, reason_len,
                         "the gradient hook of parameter %s fired %" PRId64 " time(s)%s in backward call %" PRId64
                         " of step %d (%" PRId64 " call(s) per step); each must fire exactly once per backward",
                         param, n, on, call + 1, step, calls);
            snprintf(where, where_len, "%s [%d, %" PRId64 "] = %" PRId64 " (%s: %" PRId64 ")", t->path, step - 1,
                     call, n, has_ref ? reference->name : "expected", expected);
        }
        run_tensor_release(&h);
        if (rt)
            run_tensor_release(&hr);
        if (*violated)
            return ST_OK;
    }
    return ST_OK;
}

static int judge_steps(const struct run_record *r, const struct run_record *reference, int steps,
                       const struct host_tensor *bytes, const struct host_tensor *ref_bytes, int *violated,
                       char *reason, size_t reason_len, char *where, size_t where_len);

int run_checks_judge(const struct run_record *r, const struct run_record *reference, int *violated, char *reason,
                     size_t reason_len, char *where, size_t where_len)
{
    *violated = 0;
    const struct run_tensor *bytes = run_record_find(r, RUN_CHECKS_START_BYTES);
    const struct run_tensor *ref_bytes = reference ? run_record_find(reference, RUN_CHECKS_START_BYTES) : NULL;
    int st, steps = 0;
    if (bytes && (st = check_int64(r, bytes, 1)))
        return st;
    if (ref_bytes && (st = check_int64(reference, ref_bytes, 1)))
        return st;
    for (int i = 0; i < r->n; i++) {
        int rank;
        if (hook_param(r->items[i].path, &rank) && r->items[i].t.ndim >= 1 && r->items[i].t.shape[0] > steps)
            steps = (int)r->items[i].t.shape[0];
    }
    if (bytes && (int64_t)bytes->t.numel > steps)
        steps = (int)bytes->t.numel;
    struct tensor_hold hb = {0}, hrb = {0};
    if (bytes && (st = run_tensor_acquire(r, bytes, &hb)))
        return st;
    if (ref_bytes && (st = run_tensor_acquire(reference, ref_bytes, &hrb))) {
        run_tensor_release(&hb);
        return st;
    }
    st = judge_steps(r, reference, steps, bytes ? &hb.t : NULL, ref_bytes ? &hrb.t : NULL, violated, reason,
                     reason_len, where, where_len);
    run_tensor_release(&hb);
    run_tensor_release(&hrb);
    return st;
}

/* A run whose memory the harness predicts exactly (its own models) allocates
 * nothing lazily: any growth past its reference's is a leak. Any other
 * model (a user's) may allocate bounded state at first use, or fill it over
 * a few steps, or free some: a leak there is growth beyond the reference's
 * that continues to the end, on each of the last two step starts, so it
 * needs 3 steps to be seen, and state that fills over k steps needs k + 2. */
static int exact_memory(const struct run_record *r)
{
    return !isnan(run_record_attr(r, "memory.predicted_end_forward_bytes"));
}

/* Growth beyond the reference's (from each one's step 1) at step start k (1-based). */
static int64_t excess(const int64_t *b, const int64_t *rb, int ref_steps, int k)
{
    int64_t allowed = rb && k <= ref_steps ? rb[k - 1] - rb[0] : 0;
    return (b[k - 1] - b[0]) - allowed;
}

static int growth_leak(const int64_t *b, const int64_t *rb, int ref_steps, int step, const struct run_record *r,
                       const struct run_record *reference, char *reason, size_t reason_len)
{
    int64_t e1 = excess(b, rb, ref_steps, step - 2), e2 = excess(b, rb, ref_steps, step - 1),
            e3 = excess(b, rb, ref_steps, step);
    if (!(e3 > e2 && e2 > e1))
        return 0;
    snprintf(reason, reason_len,
             "leak: %s's live bytes at step start grew on two consecutive steps beyond %s's growth: %+" PRId64
             " bytes by step %d, %+" PRId64 " by step %d, its last (bounded state stops growing once filled: state "
             "that fills over k steps needs k + 2 steps to be told from a leak)",
             r->name, reference ? reference->name : "its own step 1", e2 - e1, step - 1, e3 - e2, step);
    return 1;
}

/* Hooks and step-start bytes, step by step; the byte counts held. */
static int judge_steps(const struct run_record *r, const struct run_record *reference, int steps,
                       const struct host_tensor *bytes, const struct host_tensor *ref_bytes, int *violated,
                       char *reason, size_t reason_len, char *where, size_t where_len)
{
    int st;
    for (int step = 1; step <= steps; step++) {
        if ((st = hook_violation(r, reference, step, violated, reason, reason_len, where, where_len)) || *violated)
            return st;
        if (!bytes || step > (int64_t)bytes->numel)
            continue;
        const int64_t *b = bytes->data;
        /* What the reference grew by from its own step 1 (a model that
         * allocates lazily in its first steps grows in its baseline too). */
        const int64_t *rb = ref_bytes ? ref_bytes->data : NULL;
        int64_t allowed = rb && step <= (int64_t)ref_bytes->numel ? rb[step - 1] - rb[0] : 0;
        int64_t grew = b[step - 1] - b[0];
        if (!exact_memory(r)) {
            if (step >= 3 && step == (int)bytes->numel &&
                growth_leak(b, rb, ref_bytes ? (int)ref_bytes->numel : 0, step, r, reference, reason, reason_len)) {
                *violated = 1;
                snprintf(where, where_len, "%s [%d] = %" PRId64, RUN_CHECKS_START_BYTES, step - 1, b[step - 1]);
                return ST_OK;
            }
            continue;
        }
        if (grew == allowed)
            continue;
        *violated = 1;
        if (allowed == 0)
            snprintf(reason, reason_len,
                     "leak: step %d started with %" PRId64 " live bytes, step 1 with %" PRId64 " (%+" PRId64
                     " bytes still allocated from earlier steps)",
                     step, b[step - 1], b[0], grew);
        else
            snprintf(reason, reason_len,
                     "leak: step %d started %+" PRId64 " live bytes from step 1 (%" PRId64 " vs %" PRId64
                     "), where %s's step %d started %+" PRId64 " from its step 1",
                     step, grew, b[step - 1], b[0], reference->name, step, allowed);
        snprintf(where, where_len, "%s [%d] = %" PRId64, RUN_CHECKS_START_BYTES, step - 1, b[step - 1]);
        return ST_OK;
    }
    return ST_OK;
}

int run_checks_leak_undecided(const struct run_record *r, const struct run_record *reference, char *note,
                              size_t note_len)
{
    note[0] = '\0';
    const struct run_tensor *bytes = run_record_find(r, RUN_CHECKS_START_BYTES);
    const struct run_tensor *ref_bytes = reference ? run_record_find(reference, RUN_CHECKS_START_BYTES) : NULL;
    if (!bytes || exact_memory(r) || bytes->t.dtype != DT_I64 || bytes->t.ndim != 1 || bytes->t.numel < 2 ||
        (ref_bytes && (ref_bytes->t.dtype != DT_I64 || ref_bytes->t.ndim != 1)))
        return 0;
    struct tensor_hold hb, hrb = {0};
    if (run_tensor_acquire(r, bytes, &hb)) {
        error_clear();
        return 0;
    }
    if (ref_bytes && run_tensor_acquire(reference, ref_bytes, &hrb)) {
        error_clear();
        run_tensor_release(&hb);
        return 0;
    }
    const int64_t *b = hb.t.data, *rb = ref_bytes ? hrb.t.data : NULL;
    int n = (int)bytes->t.numel, ref_steps = ref_bytes ? (int)ref_bytes->t.numel : 0;
    int64_t last = excess(b, rb, ref_steps, n) - excess(b, rb, ref_steps, n - 1);
    int before = n >= 3 && excess(b, rb, ref_steps, n - 1) > excess(b, rb, ref_steps, n - 2);
    if (last > 0 && !before)
        snprintf(note, note_len,
                 "its live bytes at step start grew %+" PRId64 " B by step %d, its last, beyond %s's growth: too "
                 "few steps to tell bounded state from a leak (a leak grows on each of the last two step starts; "
                 "run more steps)",
                 last, n, reference ? reference->name : "its own step 1");
    run_tensor_release(&hb);
    if (ref_bytes)
        run_tensor_release(&hrb);
    return note[0] != '\0';
}
