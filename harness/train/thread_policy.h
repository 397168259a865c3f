/* thread_policy: how many intra-op threads a case runs with, and why. The
 * case's own count (--threads N, `threads = N`) wins; a case whose largest
 * activation is below libtorch's parallel grain, where no op can be split
 * across threads, runs on one; every other case gets the process's count at
 * start (libtorch's default, or the caller's OMP_NUM_THREADS). */
#ifndef CKPT_THREAD_POLICY_H
#define CKPT_THREAD_POLICY_H

#include <stdint.h>

#include "case.h"
#include "model.h"

#define THREAD_POLICY_WHY_MAX 192

struct thread_choice {
    int threads;                      /* >= 1 */
    char why[THREAD_POLICY_WHY_MAX];  /* recorded as the report's root attribute threads_reason */
};

/* Elements of the widest activation one step of m makes: rows (batch x seq)
 * times the widest parameter dimension, or a GPT block's attention scores
 * (batch x heads x seq x seq) where those are larger. */
int64_t thread_policy_largest_activation(const struct model *m, const struct ckpt_case *c);

/* The choice for c. default_threads: the process's count at start (>= 1).
 * fit_to_size: 0 when the caller pinned the count (OMP_NUM_THREADS), which
 * then holds for every case that names none. grain: libtorch's
 * (aten_parallel_grain). */
void thread_policy_choose(const struct ckpt_case *c, int64_t largest_activation, int64_t grain, int default_threads,
                          int fit_to_size, struct thread_choice *out);

#endif
