/* Unit tests for the judge's memory requirements on the harness's own runs:
 * the case's min_memory_saving and min_held_cut, and held bytes at the end
 * of forward against the model's prediction (held_check.h), on the CPU
 * exactly and on CUDA within its stated fraction, for the run and for the
 * baseline it is compared with. Runs are built in memory (judge_fixture.h). */
#include "judge_fixture.h"

#include <stdio.h>
#include <stdlib.h>

static void memory_below_the_required_saving_is_memfail(void **state)
{
    (void)state;
    struct fixture f;
    struct grads g;
    init(&f);
    base_grads(&g);
    add(&f, "baseline_0", &g);
    add(&f, "mine", &g);
    run_record_set_attr(&f.runs[1], "memory.peak_bytes", 900);
    f.c.min_memory_saving = 0.2;
    struct impl_result r = judge(&f, "mine");
    assert_int_equal(r.verdict, V_MEMFAIL);
    assert_non_null(strstr(text_str(&r.reason), "peak memory saved 10.0% < required 20.0%"));
    f.c.min_memory_saving = 0.05;
    assert_int_equal(judge(&f, "mine").verdict, V_PASS);
    fixture_free(&f);
}

static void held_bytes_cut_below_min_held_cut_is_memfail(void **state)
{
    (void)state;
    struct fixture f;
    struct grads g;
    init(&f);
    base_grads(&g);
    add(&f, "baseline_0", &g);
    add(&f, "mine", &g);
    run_record_set_attr(&f.runs[0], "memory.end_forward_bytes", 1000);
    run_record_set_attr(&f.runs[1], "memory.end_forward_bytes", 700);
    f.c.min_held_cut = 0.5;
    struct impl_result r = judge(&f, "mine");
    assert_int_equal(r.verdict, V_MEMFAIL);
    assert_non_null(strstr(text_str(&r.reason), "bytes held at the end of forward cut 30.0% < required 50.0% (min_held_cut"));
    f.c.min_held_cut = 0.25;
    assert_int_equal(judge(&f, "mine").verdict, V_PASS);
    fixture_free(&f);
}

/* Held bytes at the end of forward, and the prediction recorded beside them. */
static void set_held(struct run_record *r, double held, double predicted)
{
    run_record_set_attr(r, "memory.end_forward_bytes", held);
    run_record_set_attr(r, "memory.predicted_end_forward_bytes", predicted);
}

/* baseline_0 holding what it predicts, and "mine" with right gradients
 * holding `held` against `predicted`, judged on device. */
static struct impl_result judge_held(struct fixture *f, const char *device, double held, double predicted)
{
    struct grads g;
    init(f);
    base_grads(&g);
    add(f, "baseline_0", &g);
    add(f, "mine", &g);
    set_held(&f->runs[0], 4096, 4096);
    set_held(&f->runs[1], held, predicted);
    snprintf(f->c.device, sizeof f->c.device, "%s", device);
    return judge(f, "mine");
}

static void holding_more_than_predicted_on_the_cpu_is_memfail_naming_the_excess(void **state)
{
    (void)state;
    struct fixture f;
    struct impl_result r = judge_held(&f, "cpu", 2560, 1536);
    assert_int_equal(r.verdict, V_MEMFAIL);
    assert_non_null(strstr(text_str(&r.reason), "mine holds 2560 bytes at the end of forward, predicted 1536: 1024 bytes (+66.7%) more"));
    assert_non_null(strstr(text_str(&r.first_divergence), "/runs/mine/memory.end_forward_bytes: mine holds 2560 bytes"));
    fixture_free(&f);
}

static void holding_fewer_than_predicted_is_memfail_naming_the_shortfall(void **state)
{
    (void)state;
    struct fixture f;
    struct impl_result r = judge_held(&f, "cpu", 1535, 1536);
    assert_int_equal(r.verdict, V_MEMFAIL);
    assert_non_null(strstr(text_str(&r.reason), "1 bytes (-0.1%) fewer"));
    fixture_free(&f);
}

static void holding_exactly_the_prediction_on_the_cpu_passes(void **state)
{
    (void)state;
    struct fixture f;
    assert_int_equal(judge_held(&f, "cpu", 1536, 1536).verdict, V_PASS);
    fixture_free(&f);
}

/* CUDA's caching allocator rounds blocks up: 5% of the prediction either way. */
static void on_cuda_the_gap_may_reach_the_stated_fraction_and_no_further(void **state)
{
    (void)state;
    struct fixture f;
    assert_int_equal(judge_held(&f, "cuda:0", 10500, 10000).verdict, V_PASS);
    fixture_free(&f);
    struct impl_result r = judge_held(&f, "cuda:1", 10501, 10000);
    assert_int_equal(r.verdict, V_MEMFAIL);
    assert_non_null(strstr(text_str(&r.reason), "beyond the tolerance of 500 bytes on cuda:1"));
    fixture_free(&f);
}

/* The tolerance holds on both sides: holding less than predicted beyond
 * it is as much a finding as holding more. */
static void on_cuda_holding_fewer_than_the_fraction_allows_is_memfail(void **state)
{
    (void)state;
    struct fixture f;
    assert_int_equal(judge_held(&f, "cuda:0", 9500, 10000).verdict, V_PASS);
    fixture_free(&f);
    struct impl_result r = judge_held(&f, "cuda:0", 9499, 10000);
    assert_int_equal(r.verdict, V_MEMFAIL);
    assert_non_null(strstr(text_str(&r.reason), "501 bytes (-5.0%) fewer, beyond the tolerance of 500 bytes on cuda:0"));
    fixture_free(&f);
}

/* The baseline compared with must hold its prediction too: a plain run
 * that keeps more (the autograd core saving what no op declares) makes
 * every run judged against it MEMFAIL, naming the baseline. */
static void a_baseline_off_its_prediction_makes_memfail_naming_the_baseline(void **state)
{
    (void)state;
    struct fixture f;
    judge_held(&f, "cpu", 1536, 1536);
    set_held(&f.runs[0], 5120, 4096);
    struct impl_result r = judge(&f, "mine");
    assert_int_equal(r.verdict, V_MEMFAIL);
    assert_non_null(strstr(text_str(&r.reason), "baseline_0 holds 5120 bytes"));
    assert_non_null(strstr(text_str(&r.first_divergence), "/runs/baseline_0/"));
    fixture_free(&f);
}

/* Another producer's run has no prediction: the verdict says held bytes
 * went unjudged instead of judging them. */
static void a_run_without_a_prediction_is_not_judged_on_held_bytes_and_says_so(void **state)
{
    (void)state;
    struct fixture f;
    struct grads g;
    init(&f);
    base_grads(&g);
    add(&f, "baseline_0", &g);
    add(&f, "mine", &g);
    run_record_set_attr(&f.runs[1], "memory.end_forward_bytes", 99999);
    struct impl_result r = judge(&f, "mine");
    assert_int_equal(r.verdict, V_PASS);
    assert_non_null(strstr(text_str(&r.reason), "held bytes not judged: mine records no prediction"));
    fixture_free(&f);
}

/* A FAIL keeps its reason: the held-bytes gap is no excuse and no news. */
static void a_gap_leaves_a_fail_as_it_is(void **state)
{
    (void)state;
    struct fixture f;
    struct grads g, bad;
    init(&f);
    base_grads(&g);
    bad = g;
    bad.weight[40] = 0.5f;
    add(&f, "baseline_0", &g);
    add(&f, "mine", &bad);
    set_held(&f.runs[1], 9999, 1);
    assert_int_equal(judge(&f, "mine").verdict, V_FAIL);
    fixture_free(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(memory_below_the_required_saving_is_memfail),
        cmocka_unit_test(held_bytes_cut_below_min_held_cut_is_memfail),
        cmocka_unit_test(holding_more_than_predicted_on_the_cpu_is_memfail_naming_the_excess),
        cmocka_unit_test(holding_fewer_than_predicted_is_memfail_naming_the_shortfall),
        cmocka_unit_test(holding_exactly_the_prediction_on_the_cpu_passes),
        cmocka_unit_test(on_cuda_the_gap_may_reach_the_stated_fraction_and_no_further),
        cmocka_unit_test(on_cuda_holding_fewer_than_the_fraction_allows_is_memfail),
        cmocka_unit_test(a_baseline_off_its_prediction_makes_memfail_naming_the_baseline),
        cmocka_unit_test(a_run_without_a_prediction_is_not_judged_on_held_bytes_and_says_so),
        cmocka_unit_test(a_gap_leaves_a_fail_as_it_is),
    };
    return cmocka_run_group_tests(tests, NULL, free_kept_results);
}
