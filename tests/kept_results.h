/* kept_results: the judged results a unit suite returns by value keep
 * their texts (judge.h: heap texts) here, freed when the group ends
 * (free_kept_results as the group teardown), so no test frees a copy
 * another still reads and the leak checker sees none. */
#ifndef CKPT_KEPT_RESULTS_H
#define CKPT_KEPT_RESULTS_H

#include "judge.h"

#define KEPT_RESULTS_MAX 512
static struct impl_result kept_results[KEPT_RESULTS_MAX];
static int n_kept_results;

static inline struct impl_result keep_result(struct impl_result r)
{
    if (n_kept_results < KEPT_RESULTS_MAX)
        kept_results[n_kept_results++] = r;
    return r;
}

static inline int free_kept_results(void **state)
{
    (void)state;
    for (int i = 0; i < n_kept_results; i++)
        impl_result_free(&kept_results[i]);
    n_kept_results = 0;
    return 0;
}

#endif
