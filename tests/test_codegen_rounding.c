/* Unit tests for codegen_rounding (the rounding rule of docs/compile.md):
 * a compiled family (compiled_baseline_0/1, Inductor's kernels), the same
 * family with Inductor's graphs run op by op (compiled_graphs_baseline_0/1),
 * a run "mine" with Inductor's kernels and its twin "mine_graphs". Each
 * run's gradient differs from compiled_baseline_0 by a chosen number of
 * scaled ULP (at the tensor's scale, max |x| = 3: one ULP is 2^-22). The
 * rule makes a FAIL NOISE only with its twin bitwise, no random op in its
 * graphs (or each drawn op by op as the kernels draw it: compile.
 * random_unmatched 0 in both twins), and every tensor within 16x max(rho,
 * 1), rho being the graphs
 * baseline's distance from compiled_baseline_0. The same rule for XLA
 * (compile.codegen 2: XLA's fused HLO; the twin is the HLO compiled without
 * fusion) names XLA, and random ops do not stop it there. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "case.h"
#include "judge.h"
#include "kept_results.h"
#include "test_support.h"

#define ULP_AT_3 (1.0f / 4194304.0f) /* 2^-22 */

enum { BASE, BASE_1, GRAPHS, GRAPHS_1, MINE, TWIN, N_RUNS };

struct fixture {
    struct ckpt_case c;
    struct run_record runs[N_RUNS];
    int n;
};

static void make_run(struct run_record *r, const char *name, const char *family, float ulps, int codegen)
{
    static const float loss = 0.5f;
    float grad[4] = {0.25f, -1.0f, 3.0f, 1e-9f};
    grad[2] += ulps * ULP_AT_3;
    struct host_tensor t;
    int64_t shape[1] = {4};
    run_record_init(r, name);
    snprintf(r->baselines, sizeof r->baselines, "%s", family);
    assert_ok(host_tensor_alloc(&t, DT_F32, 0, NULL));
    memcpy(t.data, &loss, sizeof loss);
    assert_ok(run_record_add(r, "steps/1/loss", &t));
    assert_ok(host_tensor_alloc(&t, DT_F32, 1, shape));
    memcpy(t.data, grad, sizeof grad);
    assert_ok(run_record_add(r, "steps/1/grads/w", &t));
    run_record_set_attr(r, "timing.step_ms", 1.0);
    run_record_set_attr(r, "compile.codegen", codegen);
    run_record_set_attr(r, "compile.random_ops", 0);
}

/* rho: the graphs baseline's distance; mine: the run's; twin: its twin's
 * from the graphs baseline. */
static void setup(struct fixture *f, float rho, float mine, float twin)
{
    memset(f, 0, sizeof *f);
    case_defaults(&f->c);
    make_run(&f->runs[BASE], "compiled_baseline_0", "compiled_baseline", 0, 1);
    make_run(&f->runs[BASE_1], "compiled_baseline_1", "compiled_baseline", 0, 1);
    make_run(&f->runs[GRAPHS], "compiled_graphs_baseline_0", "compiled_graphs_baseline", rho, 0);
    make_run(&f->runs[GRAPHS_1], "compiled_graphs_baseline_1", "compiled_graphs_baseline", rho, 0);
    make_run(&f->runs[MINE], "mine", "compiled_baseline", mine, 1);
    make_run(&f->runs[TWIN], "mine_graphs", "compiled_graphs_baseline", rho + twin, 0);
    f->n = N_RUNS;
}

static struct impl_result judge(struct fixture *f)
{
    struct impl_result res;
    assert_ok(judge_run(&f->c, f->runs, f->n, "mine", &res));
    for (int i = 0; i < N_RUNS; i++)
        run_record_free(&f->runs[i]);
    return keep_result(res); /* its texts freed with the group (kept_results.h) */
}

static void within_inductors_own_rounding_of_the_plain_step_is_noise(void **state)
{
    (void)state;
    struct fixture f;
    setup(&f, 11, 7, 0);
    struct impl_result res = judge(&f);
    assert_int_equal(res.verdict, V_NOISE);
    assert_non_null(strstr(text_str(&res.reason), "Inductor's rounding, not the checkpoint: the same graphs run op by op "
                                       "(mine_graphs) are bitwise identical to compiled_graphs_baseline_0"));
    assert_non_null(strstr(text_str(&res.reason), "nearest its limit steps/1/grads/w, 7 scaled ULP, rho 11"));
}

static void the_same_run_without_the_rule_is_fail(void **state)
{
    (void)state;
    struct fixture f;
    setup(&f, 11, 7, 0);
    run_record_set_attr(&f.runs[MINE], "compile.codegen", 0); /* aot_eager: no kernels of Inductor's */
    struct impl_result res = judge(&f);
    assert_int_equal(res.verdict, V_FAIL);
    assert_null(strstr(text_str(&res.reason), "Inductor"));
}

static void beyond_sixteen_times_inductors_rounding_stays_fail(void **state)
{
    (void)state;
    struct fixture f;
    setup(&f, 2, 40, 0);
    struct impl_result res = judge(&f);
    assert_int_equal(res.verdict, V_FAIL);
    assert_non_null(strstr(text_str(&res.reason), "; beyond Inductor's rounding: steps/1/grads/w differs by 40 scaled ULP, more "
                                       "than 16x max(rho, 1), rho = 2 scaled ULP"));
}

static void graphs_op_by_op_differing_from_theirs_stays_fail(void **state)
{
    (void)state;
    struct fixture f;
    setup(&f, 11, 7, 1);
    struct impl_result res = judge(&f);
    assert_int_equal(res.verdict, V_FAIL);
    assert_non_null(strstr(text_str(&res.reason), "; not Inductor's rounding: the same graphs run op by op (mine_graphs) differ "
                                       "from compiled_graphs_baseline_0 too (FAIL)"));
}

static void graphs_drawing_random_numbers_are_never_rounding(void **state)
{
    (void)state;
    struct fixture f;
    setup(&f, 11, 7, 0);
    run_record_set_attr(&f.runs[MINE], "compile.random_ops", 2);
    struct impl_result res = judge(&f);
    assert_int_equal(res.verdict, V_FAIL);
    assert_non_null(strstr(text_str(&res.reason), "[not told apart from Inductor's rounding: its graphs draw random numbers (2 "
                                       "op(s))"));
}

/* compile_evidence.py reproduces the kernels' random numbers op by op (CPU
 * Philox from the same seeds): compile.random_unmatched 0 in both twins. */
static void random_numbers_drawn_as_the_kernels_draw_them_leave_the_rule_to_apply(void **state)
{
    (void)state;
    struct fixture f;
    setup(&f, 11, 7, 0);
    run_record_set_attr(&f.runs[MINE], "compile.random_ops", 3);
    run_record_set_attr(&f.runs[TWIN], "compile.random_unmatched", 0);
    run_record_set_attr(&f.runs[GRAPHS], "compile.random_unmatched", 0);
    struct impl_result res = judge(&f);
    assert_int_equal(res.verdict, V_NOISE);
    assert_non_null(strstr(text_str(&res.reason), "; its graphs' 3 random op(s) drawn op by op as Inductor's kernels draw them "
                                       "(the same Philox numbers from the same seeds)"));
}

static void random_numbers_one_twin_does_not_draw_alike_are_never_rounding(void **state)
{
    (void)state;
    struct fixture f;
    setup(&f, 11, 7, 0);
    run_record_set_attr(&f.runs[MINE], "compile.random_ops", 3);
    run_record_set_attr(&f.runs[TWIN], "compile.random_unmatched", 0);
    run_record_set_attr(&f.runs[GRAPHS], "compile.random_unmatched", 1); /* randn, or a GPU's generator */
    struct impl_result res = judge(&f);
    assert_int_equal(res.verdict, V_FAIL);
    assert_non_null(strstr(text_str(&res.reason), "[not told apart from Inductor's rounding: its graphs draw random numbers (3 "
                                       "op(s))"));
}

static void without_the_twin_the_fail_says_what_is_missing(void **state)
{
    (void)state;
    struct fixture f;
    setup(&f, 11, 7, 0);
    f.n = TWIN; /* the report has no mine_graphs */
    struct impl_result res = judge(&f);
    assert_int_equal(res.verdict, V_FAIL);
    assert_non_null(strstr(text_str(&res.reason), "[Inductor's rounding cannot be told apart: the report has no mine_graphs]"));
}

static void a_bitwise_run_is_pass_whatever_the_rounding(void **state)
{
    (void)state;
    struct fixture f;
    setup(&f, 11, 0, 0);
    struct impl_result res = judge(&f);
    assert_int_equal(res.verdict, V_PASS);
    assert_null(strstr(text_str(&res.reason), "Inductor"));
}

/* The fixture as XLA's: the family's baselines and the run ran XLA's fused HLO. */
static void as_xla(struct fixture *f)
{
    for (int i = 0; i < N_RUNS; i++)
        if (i == BASE || i == BASE_1 || i == MINE)
            run_record_set_attr(&f->runs[i], "compile.codegen", 2);
}

static void within_xlas_own_rounding_of_the_plain_step_is_noise_naming_xla(void **state)
{
    (void)state;
    struct fixture f;
    setup(&f, 3, 6, 0);
    as_xla(&f);
    struct impl_result res = judge(&f);
    assert_int_equal(res.verdict, V_NOISE);
    assert_non_null(strstr(text_str(&res.reason), "XLA's rounding, not the checkpoint: the same HLO compiled without XLA's "
                                       "fusion (mine_graphs) is bitwise identical to compiled_graphs_baseline_0"));
    assert_null(strstr(text_str(&res.reason), "Inductor"));
}

static void xla_hlo_without_fusion_differing_stays_fail(void **state)
{
    (void)state;
    struct fixture f;
    setup(&f, 3, 6, 1);
    as_xla(&f);
    struct impl_result res = judge(&f);
    assert_int_equal(res.verdict, V_FAIL);
    assert_non_null(strstr(text_str(&res.reason), "; not XLA's rounding: the same HLO compiled without XLA's fusion "
                                       "(mine_graphs) differs from compiled_graphs_baseline_0 too (FAIL)"));
}

static void xla_random_ops_leave_the_rule_to_the_twin(void **state)
{
    (void)state;
    struct fixture f;
    setup(&f, 3, 6, 0);
    as_xla(&f);
    run_record_set_attr(&f.runs[MINE], "compile.random_ops", 2); /* XLA's random bits: integer HLO */
    struct impl_result res = judge(&f);
    assert_int_equal(res.verdict, V_NOISE);
}

static void a_run_of_another_compiler_than_its_baseline_is_not_rounding(void **state)
{
    (void)state;
    struct fixture f;
    setup(&f, 3, 6, 0);
    run_record_set_attr(&f.runs[MINE], "compile.codegen", 2); /* the baselines ran Inductor's kernels */
    struct impl_result res = judge(&f);
    assert_int_equal(res.verdict, V_FAIL);
    assert_null(strstr(text_str(&res.reason), "rounding"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(within_inductors_own_rounding_of_the_plain_step_is_noise),
        cmocka_unit_test(the_same_run_without_the_rule_is_fail),
        cmocka_unit_test(beyond_sixteen_times_inductors_rounding_stays_fail),
        cmocka_unit_test(graphs_op_by_op_differing_from_theirs_stays_fail),
        cmocka_unit_test(graphs_drawing_random_numbers_are_never_rounding),
        cmocka_unit_test(random_numbers_drawn_as_the_kernels_draw_them_leave_the_rule_to_apply),
        cmocka_unit_test(random_numbers_one_twin_does_not_draw_alike_are_never_rounding),
        cmocka_unit_test(without_the_twin_the_fail_says_what_is_missing),
        cmocka_unit_test(a_bitwise_run_is_pass_whatever_the_rounding),
        cmocka_unit_test(within_xlas_own_rounding_of_the_plain_step_is_noise_naming_xla),
        cmocka_unit_test(xla_hlo_without_fusion_differing_stays_fail),
        cmocka_unit_test(xla_random_ops_leave_the_rule_to_the_twin),
        cmocka_unit_test(a_run_of_another_compiler_than_its_baseline_is_not_rounding),
    };
    return cmocka_run_group_tests(tests, NULL, free_kept_results);
}
