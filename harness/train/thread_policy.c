/* thread_policy: see thread_policy.h. The grain rule is libtorch's own: its
 * parallel loops never split fewer than `grain` elements, so below it a
 * second thread has nothing to do but wait; and a GEMM this small is run on
 * one thread by the BLAS as well. */
#include "thread_policy.h"

#include <stdio.h>

int64_t thread_policy_largest_activation(const struct model *m, const struct ckpt_case *c)
{
    int64_t widest = c->hidden;
    for (int i = 0; i < m->n_params; i++) {
        const struct model_param *p = &m->params[i];
        for (int d = 0; d < p->ndim && d < 2; d++)
            if (p->shape[d] > widest)
                widest = p->shape[d];
    }
    int64_t largest = (int64_t)c->batch * c->seq * widest;
    if (c->model == MODEL_GPT_BLOCK) {
        int64_t scores = (int64_t)c->batch * (c->heads > 0 ? c->heads : 1) * c->seq * c->seq;
        if (scores > largest)
            largest = scores;
    }
    return largest;
}

void thread_policy_choose(const struct ckpt_case *c, int64_t largest_activation, int64_t grain, int default_threads,
                          int fit_to_size, struct thread_choice *out)
{
    if (default_threads < 1)
        default_threads = 1;
    if (c->threads > 0) {
        out->threads = c->threads;
        snprintf(out->why, sizeof out->why, "asked for by the case or --threads");
    } else if (!fit_to_size) {
        out->threads = default_threads;
        snprintf(out->why, sizeof out->why, "OMP_NUM_THREADS");
    } else if (largest_activation < grain) {
        out->threads = 1;
        snprintf(out->why, sizeof out->why,
                 "largest activation %lld elements, below libtorch's parallel grain of %lld: one thread",
                 (long long)largest_activation, (long long)grain);
    } else {
        out->threads = default_threads;
        snprintf(out->why, sizeof out->why, "largest activation %lld elements: libtorch's default",
                 (long long)largest_activation);
    }
}
