/* judge_result: a result's heap texts (judge.h impl_result), freed and
 * checked in one place, so every owner of a result treats them alike. */
#include "judge.h"

#include "error.h"

void impl_result_free(struct impl_result *r)
{
    struct text *texts[] = {&r->reason, &r->first_divergence, &r->op_log, &r->memory_judged,
                            &r->memory_extra, &r->memory_state, &r->memory_statement};
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++)
        text_free(texts[i]);
}

void case_result_free(struct case_result *r)
{
    for (int i = 0; i < r->n_results; i++)
        impl_result_free(&r->results[i]);
    r->n_results = 0;
}

int impl_result_check(const struct impl_result *r)
{
    const struct text *texts[] = {&r->reason, &r->first_divergence, &r->op_log, &r->memory_judged,
                                  &r->memory_extra, &r->memory_state, &r->memory_statement};
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++)
        if (texts[i]->failed)
            return text_check(texts[i], "a verdict's texts");
    return ST_OK;
}
