/* Unit tests for xla_evidence (the judge's reading of XLA compiler
 * evidence, /runs/<run>/xla): each test builds a baseline and a run whose
 * gradients agree bitwise, gives them the attributes the XLA frontend
 * records, and pins one rule: a merged recompute is MEMFAIL naming XLA's
 * CSE, a kept recompute that saves nothing is MEMFAIL naming the schedule,
 * one that saves is PASS with its figures, extra barriers are a finding,
 * and a run without the evidence is judged as before. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "case.h"
#include "judge.h"
#include "kept_results.h"
#include "test_support.h"

struct fixture {
    struct ckpt_case c;
    struct run_record runs[2];
};

static void make_run(struct run_record *r, const char *name, double temp)
{
    static const float loss = 0.5f, grad[4] = {0.25f, -1.0f, 3.0f, 1e-9f};
    struct host_tensor t;
    int64_t shape[1] = {4};
    run_record_init(r, name);
    assert_ok(host_tensor_alloc(&t, DT_F32, 0, NULL));
    memcpy(t.data, &loss, sizeof loss);
    assert_ok(run_record_add(r, "steps/1/loss", &t));
    assert_ok(host_tensor_alloc(&t, DT_F32, 1, shape));
    memcpy(t.data, grad, sizeof grad);
    assert_ok(run_record_add(r, "steps/1/grads/w", &t));
    run_record_set_attr(r, "timing.step_ms", 1.0);
    run_record_set_attr(r, "xla.temp_bytes", temp);
    run_record_set_attr(r, "xla.total_bytes", temp + 1000);
    run_record_set_attr(r, "xla.recompute_ops_unoptimized", 0);
}

/* baseline_0 with 393216 temp bytes; "mine" with `temp`, `regions`
 * regions of 21 recompute ops each, `left` of them after optimization. */
static void setup(struct fixture *f, double temp, int regions, int merged, int left)
{
    memset(f, 0, sizeof *f);
    case_defaults(&f->c);
    make_run(&f->runs[0], "baseline_0", 393216);
    make_run(&f->runs[1], "mine", temp);
    struct run_record *r = &f->runs[1];
    run_record_set_attr(r, "xla.regions", regions);
    run_record_set_attr(r, "xla.regions_merged", merged);
    run_record_set_attr(r, "xla.recompute_ops_unoptimized", 21 * regions);
    run_record_set_attr(r, "xla.recompute_ops_optimized", left);
}

static struct impl_result judge(struct fixture *f)
{
    struct impl_result res;
    assert_ok(judge_run(&f->c, f->runs, 2, "mine", &res));
    run_record_free(&f->runs[0]);
    run_record_free(&f->runs[1]);
    return keep_result(res); /* its texts freed with the group (kept_results.h) */
}

static void recompute_merged_by_cse_is_memfail_naming_xla(void **state)
{
    (void)state;
    struct fixture f;
    setup(&f, 393216, 4, 4, 0);
    struct impl_result r = judge(&f);
    assert_int_equal(r.verdict, V_MEMFAIL);
    assert_non_null(strstr(text_str(&r.reason), "the recompute of 4 of 4 region(s) was merged into the forward by XLA (CSE): "
                                     "84 recompute op(s) traced, 0 left after optimization; XLA temp buffers 1.00x "
                                     "baseline (393216 vs 393216 bytes"));
}

static void kept_recompute_saving_nothing_is_memfail_naming_the_schedule(void **state)
{
    (void)state;
    struct fixture f;
    setup(&f, 425984, 4, 0, 32);
    run_record_set_attr(&f.runs[1], "xla.regions_scheduled_early", 3);
    run_record_set_attr(&f.runs[1], "xla.barriers", 4);
    run_record_set_attr(&f.runs[1], "xla.barriers_optimized", 0);
    struct impl_result r = judge(&f);
    assert_int_equal(r.verdict, V_MEMFAIL);
    assert_non_null(strstr(text_str(&r.reason), "the recompute survives XLA's optimization (32 op(s) marked as "
                                     "recompute after it, 84 traced), but nothing is saved: XLA temp buffers 1.08x "
                                     "baseline"));
    assert_non_null(strstr(text_str(&r.reason), "scheduled the recompute of 3 region(s) ahead of the backward that makes its "
                                     "incoming gradient (opt-barriers: 4 before optimization, 0 after)"));
}

/* JAX's optimized HLO does not tell regions apart (regions_merged 0), and
 * a few replayed ops without a forward twin stay marked: the step compiled
 * to no more instructions than the plain one is the merge. */
static void step_no_bigger_than_plain_is_memfail_naming_cse(void **state)
{
    (void)state;
    struct fixture f;
    setup(&f, 393216, 4, 0, 8);
    run_record_set_attr(&f.runs[0], "xla.ops_optimized", 325);
    run_record_set_attr(&f.runs[1], "xla.ops_optimized", 325);
    struct impl_result r = judge(&f);
    assert_int_equal(r.verdict, V_MEMFAIL);
    assert_non_null(strstr(text_str(&r.reason), "XLA merged the recompute of 4 region(s) into the forward (CSE): the optimized "
                                     "step has 325 instructions, no more than the plain baseline's 325 (84 recompute "
                                     "op(s) traced, 8 still marked after optimization); XLA temp buffers 1.00x"));
}

static void step_bigger_than_plain_saving_nothing_is_not_called_a_merge(void **state)
{
    (void)state;
    struct fixture f;
    setup(&f, 393216, 4, 0, 8);
    run_record_set_attr(&f.runs[0], "xla.ops_optimized", 325);
    run_record_set_attr(&f.runs[1], "xla.ops_optimized", 326);
    struct impl_result r = judge(&f);
    assert_int_equal(r.verdict, V_MEMFAIL);
    assert_null(strstr(text_str(&r.reason), "CSE"));
    assert_non_null(strstr(text_str(&r.reason), "(8 op(s) marked as recompute after it, 84 traced), but nothing is saved"));
}

static void kept_recompute_that_saves_passes_with_its_figures(void **state)
{
    (void)state;
    struct fixture f;
    setup(&f, 131280, 4, 0, 36);
    struct impl_result r = judge(&f);
    assert_int_equal(r.verdict, V_PASS);
    assert_non_null(strstr(text_str(&r.reason), "bitwise identical"));
    assert_non_null(strstr(text_str(&r.reason), "recompute kept by XLA in 4 region(s): 36 op(s) marked as recompute "
                                     "after optimization, 84 traced, XLA temp buffers 0.33x"));
}

static void barriers_beyond_the_recompute_inputs_are_a_finding_with_their_bytes(void **state)
{
    (void)state;
    struct fixture f;
    setup(&f, 131792, 4, 0, 48);
    run_record_set_attr(&f.runs[1], "xla.barrier_other_values", 52);
    run_record_set_attr(&f.runs[1], "xla.barrier_recompute_inputs", 16);
    run_record_set_attr(&f.runs[1], "xla.barrier_other_bytes", 401408);
    struct impl_result r = judge(&f);
    assert_int_equal(r.verdict, V_PASS);
    assert_non_null(strstr(text_str(&r.reason), "[finding: opt-barriers beyond the recompute inputs: 52 held value(s) no "
                                     "recompute op reads (16 recompute input(s) besides), 401408 bytes"));
}

static void run_without_xla_evidence_is_judged_as_before(void **state)
{
    (void)state;
    struct fixture f;
    memset(&f, 0, sizeof f);
    case_defaults(&f.c);
    make_run(&f.runs[0], "baseline_0", 393216);
    make_run(&f.runs[1], "mine", 393216);
    struct impl_result r = judge(&f);
    assert_int_equal(r.verdict, V_PASS);
    assert_null(strstr(text_str(&r.reason), "XLA"));
}

static void a_failing_run_stays_fail_whatever_xla_did(void **state)
{
    (void)state;
    struct fixture f;
    setup(&f, 393216, 4, 4, 0);
    struct run_tensor *w = (struct run_tensor *)run_record_find(&f.runs[1], "steps/1/grads/w");
    assert_non_null(w);
    ((float *)w->t.data)[2] = 3.5f;
    struct impl_result r = judge(&f);
    assert_int_equal(r.verdict, V_FAIL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(recompute_merged_by_cse_is_memfail_naming_xla),
        cmocka_unit_test(step_no_bigger_than_plain_is_memfail_naming_cse),
        cmocka_unit_test(step_bigger_than_plain_saving_nothing_is_not_called_a_merge),
        cmocka_unit_test(kept_recompute_saving_nothing_is_memfail_naming_the_schedule),
        cmocka_unit_test(kept_recompute_that_saves_passes_with_its_figures),
        cmocka_unit_test(barriers_beyond_the_recompute_inputs_are_a_finding_with_their_bytes),
        cmocka_unit_test(run_without_xla_evidence_is_judged_as_before),
        cmocka_unit_test(a_failing_run_stays_fail_whatever_xla_did),
    };
    return cmocka_run_group_tests(tests, NULL, free_kept_results);
}
