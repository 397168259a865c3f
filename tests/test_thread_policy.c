/* The intra-op thread count each case runs with (thread_policy.h): the
 * case's own count first, the caller's pinned count next, one thread below
 * libtorch's parallel grain, the process's default above it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "thread_policy.h"

#define GRAIN 32768

static struct ckpt_case small_mlp(void)
{
    struct ckpt_case c;
    case_defaults(&c);
    c.model = MODEL_MLP;
    c.batch = 2, c.seq = 8, c.hidden = 16, c.heads = 2;
    return c;
}

/* A model whose one weight is [out, in]. */
static struct model one_weight(struct model_param *p, int64_t out, int64_t in)
{
    memset(p, 0, sizeof *p);
    p->ndim = 2, p->shape[0] = out, p->shape[1] = in;
    struct model m;
    memset(&m, 0, sizeof m);
    m.n_params = 1, m.params = p;
    return m;
}

static void the_case_own_count_wins_even_when_small(void **state)
{
    (void)state;
    struct ckpt_case c = small_mlp();
    c.threads = 3;
    struct thread_choice t;
    thread_policy_choose(&c, 10, GRAIN, 2, 1, &t);
    assert_int_equal(t.threads, 3);
    assert_non_null(strstr(t.why, "--threads"));
}

static void a_pinned_count_holds_for_a_small_case(void **state)
{
    (void)state;
    struct ckpt_case c = small_mlp();
    struct thread_choice t;
    thread_policy_choose(&c, 10, GRAIN, 4, 0, &t);
    assert_int_equal(t.threads, 4);
    assert_string_equal(t.why, "OMP_NUM_THREADS");
}

static void a_case_below_the_grain_runs_on_one_thread_saying_why(void **state)
{
    (void)state;
    struct ckpt_case c = small_mlp();
    struct thread_choice t;
    thread_policy_choose(&c, GRAIN - 1, GRAIN, 2, 1, &t);
    assert_int_equal(t.threads, 1);
    assert_non_null(strstr(t.why, "32767 elements, below libtorch's parallel grain of 32768"));
}

static void a_case_at_the_grain_gets_the_default(void **state)
{
    (void)state;
    struct ckpt_case c = small_mlp();
    struct thread_choice t;
    thread_policy_choose(&c, GRAIN, GRAIN, 2, 1, &t);
    assert_int_equal(t.threads, 2);
    assert_non_null(strstr(t.why, "libtorch's default"));
}

static void the_largest_activation_is_rows_times_the_widest_parameter_dimension(void **state)
{
    (void)state;
    struct ckpt_case c = small_mlp();
    struct model_param p;
    struct model m = one_weight(&p, 4 * 16, 16);
    assert_int_equal(thread_policy_largest_activation(&m, &c), 2 * 8 * 64);
}

static void a_gpt_block_counts_its_attention_scores_where_they_are_larger(void **state)
{
    (void)state;
    struct ckpt_case c = small_mlp();
    c.model = MODEL_GPT_BLOCK;
    c.seq = 512, c.heads = 4;
    struct model_param p;
    struct model m = one_weight(&p, 64, 16);
    /* scores 2 x 4 x 512 x 512 against rows 2 x 512 x 64 */
    assert_int_equal(thread_policy_largest_activation(&m, &c), (int64_t)2 * 4 * 512 * 512);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_case_own_count_wins_even_when_small),
        cmocka_unit_test(a_pinned_count_holds_for_a_small_case),
        cmocka_unit_test(a_case_below_the_grain_runs_on_one_thread_saying_why),
        cmocka_unit_test(a_case_at_the_grain_gets_the_default),
        cmocka_unit_test(the_largest_activation_is_rows_times_the_widest_parameter_dimension),
        cmocka_unit_test(a_gpt_block_counts_its_attention_scores_where_they_are_larger),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
