/* Unit tests for the judge's run checks (run_checks.h): each parameter's
 * gradient hook fired as often as in the baselines, per rank under DDP,
 * and no step starting with more live bytes than step 1 (a leak). */
#include "judge_fixture.h"

#include <stdio.h>
#include <stdlib.h>

#include "run_checks.h"

/* ---- hook counts and step-start bytes (run_checks) ------------------------------ */

static void add_i64(struct run_record *r, const char *path, int ndim, const int64_t *shape, const int64_t *v)
{
    struct host_tensor t;
    assert_ok(host_tensor_alloc(&t, DT_I64, ndim, shape));
    memcpy(t.data, v, t.numel * sizeof *v);
    assert_ok(run_record_add(r, path, &t));
}

/* steps = 2, one backward call each; fires of l0.weight and start bytes. */
static void add_checks(struct run_record *r, int64_t fires_step2, int64_t bytes_step2)
{
    int64_t hook_shape[2] = {2, 1}, bytes_shape[1] = {2};
    int64_t once[2] = {1, 1}, weight[2] = {1, fires_step2}, bytes[2] = {4096, bytes_step2};
    add_i64(r, "checks/hook_fires/l0.bias", 2, hook_shape, once);
    add_i64(r, "checks/hook_fires/l0.weight", 2, hook_shape, weight);
    add_i64(r, "checks/step_start_bytes", 1, bytes_shape, bytes);
}

/* A harness run: its memory is predicted exactly (run_checks.c's exact
 * leak rule applies); the held bytes match the prediction. */
static void predicted_exactly(struct run_record *r)
{
    run_record_set_attr(r, "memory.end_forward_bytes", 1000);
    run_record_set_attr(r, "memory.predicted_end_forward_bytes", 1000);
}

/* checks/step_start_bytes of `steps` steps (hooks once each). */
static void add_start_bytes(struct run_record *r, int steps, const int64_t *bytes)
{
    int64_t hook_shape[2] = {steps, 1}, bytes_shape[1] = {steps}, once[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    add_i64(r, "checks/hook_fires/l0.weight", 2, hook_shape, once);
    add_i64(r, "checks/step_start_bytes", 1, bytes_shape, bytes);
}

/* Baselines of a user's model (no prediction) that start every one of
 * their 3 steps with 4096 live bytes, and a run "mine" starting with `b`. */
static struct impl_result judge_user_start_bytes(const int64_t *b)
{
    struct fixture f;
    struct grads g;
    int64_t flat[3] = {4096, 4096, 4096};
    init(&f);
    base_grads(&g);
    add_baselines(&f, &g, 0);
    add_start_bytes(&f.runs[0], 3, flat);
    add_start_bytes(&f.runs[1], 3, flat);
    add(&f, "mine", &g);
    add_start_bytes(&f.runs[f.n - 1], 3, b);
    struct impl_result r = judge(&f, "mine");
    fixture_free(&f);
    return r;
}

static void a_user_run_allocating_bounded_state_once_is_no_leak(void **state)
{
    (void)state;
    int64_t once[3] = {4096, 4096 + 65536, 4096 + 65536};
    assert_int_equal(judge_user_start_bytes(once).verdict, V_PASS);
}

static void a_user_run_freeing_memory_between_steps_is_no_leak(void **state)
{
    (void)state;
    int64_t freed[3] = {4096 + 34048, 4096, 4096};
    assert_int_equal(judge_user_start_bytes(freed).verdict, V_PASS);
}

static void a_user_run_growing_on_two_consecutive_step_starts_leaks(void **state)
{
    (void)state;
    int64_t growing[3] = {4096, 4096 + 512, 4096 + 1024};
    struct impl_result r = judge_user_start_bytes(growing);
    assert_int_equal(r.verdict, V_FAIL);
    assert_non_null(strstr(text_str(&r.reason), "leak: mine's live bytes at step start grew on two consecutive steps beyond "
                                     "baseline_0's growth: +512 bytes by step 2, +512 by step 3"));
    assert_non_null(strstr(text_str(&r.first_divergence), "checks/step_start_bytes [2] = 5120"));
}

/* The same over `steps` steps (at most 8), the baselines flat. */
static struct impl_result judge_user_steps(int steps, const int64_t *b)
{
    struct fixture f;
    struct grads g;
    int64_t flat[8] = {4096, 4096, 4096, 4096, 4096, 4096, 4096, 4096};
    init(&f);
    base_grads(&g);
    add_baselines(&f, &g, 0);
    add_start_bytes(&f.runs[0], steps, flat);
    add_start_bytes(&f.runs[1], steps, flat);
    add(&f, "mine", &g);
    add_start_bytes(&f.runs[f.n - 1], steps, b);
    struct impl_result r = judge(&f, "mine");
    fixture_free(&f);
    return r;
}

static void a_user_run_whose_state_fills_over_two_steps_then_holds_still_is_no_leak(void **state)
{
    (void)state; /* a deque(maxlen=2) of RNG states per module */
    int64_t fills[5] = {4096, 4096 + 10112, 4096 + 20224, 4096 + 20224, 4096 + 20224};
    struct impl_result r = judge_user_steps(5, fills);
    assert_int_equal(r.verdict, V_PASS);
    assert_null(strstr(text_str(&r.reason), "too few steps"));
}

static void a_user_run_growing_up_to_its_last_step_leaks(void **state)
{
    (void)state;
    int64_t grows[5] = {4096, 4096, 4096, 4096 + 10112, 4096 + 20224};
    struct impl_result r = judge_user_steps(5, grows);
    assert_int_equal(r.verdict, V_FAIL);
    assert_non_null(strstr(text_str(&r.reason), "+10112 bytes by step 4, +10112 by step 5, its last"));
}

static void a_user_run_growing_at_its_last_step_alone_says_too_few_steps_to_tell(void **state)
{
    (void)state;
    int64_t late[2] = {4096, 4096 + 65536};
    struct impl_result r = judge_user_steps(2, late);
    assert_int_equal(r.verdict, V_PASS);
    assert_non_null(strstr(text_str(&r.reason), "grew +65536 B by step 2, its last, beyond baseline_0's growth: too few steps "
                                     "to tell bounded state from a leak"));
}

static void checked_baselines(struct fixture *f, const struct grads *g)
{
    add_baselines(f, g, 0);
    add_checks(&f->runs[0], 1, 4096);
    add_checks(&f->runs[1], 1, 4096);
}

static void a_hook_that_fires_twice_fails_a_run_whose_gradients_match(void **state)
{
    (void)state;
    struct fixture f;
    struct grads g;
    init(&f);
    base_grads(&g);
    checked_baselines(&f, &g);
    add(&f, "mine", &g);
    add_checks(&f.runs[f.n - 1], 2, 4096);
    struct impl_result r = judge(&f, "mine");
    assert_int_equal(r.verdict, V_FAIL);
    assert_non_null(strstr(text_str(&r.reason), "parameter l0.weight fired 2 time(s) in backward call 1 of step 2"));
    assert_non_null(strstr(text_str(&r.first_divergence), "checks/hook_fires/l0.weight"));
    fixture_free(&f);
}

static void a_hook_that_never_fires_fails_too(void **state)
{
    (void)state;
    struct fixture f;
    struct grads g;
    init(&f);
    base_grads(&g);
    checked_baselines(&f, &g);
    add(&f, "mine", &g);
    add_checks(&f.runs[f.n - 1], 0, 4096);
    struct impl_result r = judge(&f, "mine");
    assert_int_equal(r.verdict, V_FAIL);
    assert_non_null(strstr(text_str(&r.reason), "fired 0 time(s)"));
    fixture_free(&f);
}

static void a_step_starting_with_more_live_bytes_than_step_1_fails_as_a_leak(void **state)
{
    (void)state;
    struct fixture f;
    struct grads g;
    init(&f);
    base_grads(&g);
    checked_baselines(&f, &g);
    add(&f, "mine", &g);
    add_checks(&f.runs[f.n - 1], 1, 4096 + 512);
    predicted_exactly(&f.runs[f.n - 1]);
    struct impl_result r = judge(&f, "mine");
    assert_int_equal(r.verdict, V_FAIL);
    assert_non_null(strstr(text_str(&r.reason), "leak: step 2 started with 4608 live bytes, step 1 with 4096 (+512 bytes"));
    assert_non_null(strstr(text_str(&r.first_divergence), "checks/step_start_bytes [1] = 4608"));
    fixture_free(&f);
}

static void runs_without_hook_or_byte_records_are_not_held_to_them(void **state)
{
    (void)state;
    struct fixture f;
    struct grads g;
    init(&f);
    base_grads(&g);
    add_baselines(&f, &g, 0);
    add(&f, "mine", &g);
    assert_int_equal(judge(&f, "mine").verdict, V_PASS);
    fixture_free(&f);
}

/* A plain step whose backward reaches a parameter's hook twice sets the
 * count: a checkpoint firing it as often is right (torch's reentrant
 * checkpoint, where the baseline fires as often). */
static void a_hook_fired_as_often_as_the_baselines_passes(void **state)
{
    (void)state;
    struct fixture f;
    struct grads g;
    init(&f);
    base_grads(&g);
    add_baselines(&f, &g, 0);
    add_checks(&f.runs[0], 2, 4096);
    add_checks(&f.runs[1], 2, 4096);
    add(&f, "mine", &g);
    add_checks(&f.runs[f.n - 1], 2, 4096);
    assert_int_equal(judge(&f, "mine").verdict, V_PASS);
    fixture_free(&f);
}

static void a_hook_firing_fewer_times_than_the_baselines_fails(void **state)
{
    (void)state;
    struct fixture f;
    struct grads g;
    init(&f);
    base_grads(&g);
    add_baselines(&f, &g, 0);
    add_checks(&f.runs[0], 2, 4096);
    add_checks(&f.runs[1], 2, 4096);
    add(&f, "mine", &g);
    add_checks(&f.runs[f.n - 1], 1, 4096);
    struct impl_result r = judge(&f, "mine");
    assert_int_equal(r.verdict, V_FAIL);
    assert_non_null(strstr(text_str(&r.reason), "parameter l0.weight fired 1 time(s) in backward call 1 of step 2 (1 call(s) per "
                                     "step), where baseline_0's fired 2: what hangs on it runs less often"));
    assert_string_equal(text_str(&r.first_divergence), "checks/hook_fires/l0.weight [1, 0] = 1 (baseline_0: 2)");
    fixture_free(&f);
}

/* A distributed run's counts are each rank's (ranks/<r>/checks/...), held
 * to the same rank of its baseline, and the reason names the rank. */
static void a_ranks_hook_count_is_held_to_the_same_rank_of_the_baseline(void **state)
{
    (void)state;
    struct fixture f;
    struct grads g;
    int64_t shape[2] = {2, 1}, once[2] = {1, 1}, twice[2] = {1, 2};
    init(&f);
    base_grads(&g);
    add_baselines(&f, &g, 0);
    for (int i = 0; i < 2; i++) {
        add_i64(&f.runs[i], "ranks/0/checks/hook_fires/l0.weight", 2, shape, once);
        add_i64(&f.runs[i], "ranks/1/checks/hook_fires/l0.weight", 2, shape, once);
    }
    add(&f, "mine", &g);
    add_i64(&f.runs[f.n - 1], "ranks/0/checks/hook_fires/l0.weight", 2, shape, once);
    add_i64(&f.runs[f.n - 1], "ranks/1/checks/hook_fires/l0.weight", 2, shape, twice);
    struct impl_result r = judge(&f, "mine");
    assert_int_equal(r.verdict, V_FAIL);
    assert_non_null(strstr(text_str(&r.reason), "gradients bitwise identical to baseline_0, but the gradient hook of parameter "
                                     "l0.weight fired 2 time(s) on rank 1 in backward call 1 of step 2 (1 call(s) per "
                                     "step), where baseline_0's fired 1 on rank 1: what hangs on it runs more often"));
    assert_string_equal(text_str(&r.first_divergence), "ranks/1/checks/hook_fires/l0.weight [1, 0] = 2 (baseline_0: 1)");
    fixture_free(&f);
}

static void a_hook_count_fail_says_the_gradients_are_right_and_what_breaks(void **state)
{
    (void)state;
    struct fixture f;
    struct grads g;
    init(&f);
    base_grads(&g);
    checked_baselines(&f, &g);
    add(&f, "mine", &g);
    add_checks(&f.runs[f.n - 1], 2, 4096);
    struct impl_result r = judge(&f, "mine");
    assert_int_equal(r.verdict, V_FAIL);
    assert_non_null(strstr(text_str(&r.reason), "gradients bitwise identical to baseline_0, but the gradient hook of parameter "
                                     "l0.weight fired 2 time(s)"));
    assert_non_null(strstr(text_str(&r.reason), "where baseline_0's fired 1"));
    assert_non_null(strstr(text_str(&r.reason), "a gradient-scaling register_hook scales again; DDP without static_graph=True "
                                     "marks the parameter ready twice"));
    fixture_free(&f);
}

static void a_hook_count_fail_within_noise_says_the_gradients_are_within_it(void **state)
{
    (void)state;
    struct fixture f;
    struct grads g, mine;
    init(&f);
    base_grads(&g);
    mine = g;
    add_noise(&mine, 2);
    add_baselines(&f, &g, 1);
    add_checks(&f.runs[0], 1, 4096);
    add_checks(&f.runs[1], 1, 4096);
    add(&f, "mine", &mine);
    add_checks(&f.runs[f.n - 1], 2, 4096);
    struct impl_result r = judge(&f, "mine");
    assert_int_equal(r.verdict, V_FAIL);
    assert_non_null(strstr(text_str(&r.reason), "gradients within the kernels' noise of baseline_0, but the gradient hook"));
    fixture_free(&f);
}

/* The run did the same work with the right gradients: its memory and
 * time figures stand beside the FAIL. */
static void a_hook_count_fail_keeps_its_memory_and_time_figures(void **state)
{
    (void)state;
    struct fixture f;
    struct grads g;
    init(&f);
    base_grads(&g);
    checked_baselines(&f, &g);
    add(&f, "mine", &g);
    add_checks(&f.runs[f.n - 1], 2, 4096);
    run_record_set_attr(&f.runs[f.n - 1], "memory.peak_bytes", 900);
    run_record_set_attr(&f.runs[f.n - 1], "timing.step_ms", 1.5);
    struct impl_result r = judge(&f, "mine");
    assert_int_equal(r.verdict, V_FAIL);
    assert_true(r.gradients_right);
    assert_true(fabs(r.memory_saved - 0.1) < 1e-12);
    assert_true(fabs(r.overhead - 1.5) < 1e-12);
    fixture_free(&f);
}

/* Where the baseline records no count for a parameter, the run's is held
 * to exactly once per backward, in both directions. */
static void a_hook_count_the_baseline_lacks_is_held_to_once(void **state)
{
    (void)state;
    struct fixture f;
    struct grads g;
    init(&f);
    base_grads(&g);
    add_baselines(&f, &g, 0);
    add(&f, "twice", &g);
    add_checks(&f.runs[f.n - 1], 2, 4096);
    add(&f, "once", &g);
    add_checks(&f.runs[f.n - 1], 1, 4096);
    struct impl_result r = judge(&f, "twice");
    assert_int_equal(r.verdict, V_FAIL);
    assert_non_null(strstr(text_str(&r.reason), "baseline_0 records no count for it, so it must fire exactly once per backward"));
    assert_int_equal(judge(&f, "once").verdict, V_PASS);
    fixture_free(&f);
}

/* A model that allocates lazily in its first steps (a user's, through
 * python/ckpt_verify) grows in its baseline too: growing as much is no leak. */
static void a_run_growing_as_much_as_its_baseline_is_no_leak(void **state)
{
    (void)state;
    struct fixture f;
    struct grads g;
    init(&f);
    base_grads(&g);
    add_baselines(&f, &g, 0);
    add_checks(&f.runs[0], 1, 8192);
    add_checks(&f.runs[1], 1, 8192);
    add(&f, "mine", &g);
    add_checks(&f.runs[f.n - 1], 1, 8192);
    assert_int_equal(judge(&f, "mine").verdict, V_PASS);
    fixture_free(&f);
}

static void a_run_growing_more_than_its_baseline_fails_naming_both(void **state)
{
    (void)state;
    struct fixture f;
    struct grads g;
    init(&f);
    base_grads(&g);
    add_baselines(&f, &g, 0);
    add_checks(&f.runs[0], 1, 8192);
    add_checks(&f.runs[1], 1, 8192);
    add(&f, "mine", &g);
    add_checks(&f.runs[f.n - 1], 1, 8192 + 512);
    predicted_exactly(&f.runs[f.n - 1]);
    struct impl_result r = judge(&f, "mine");
    assert_int_equal(r.verdict, V_FAIL);
    assert_non_null(strstr(text_str(&r.reason), "leak: step 2 started +4608 live bytes from step 1 (8704 vs 4096), where "
                                     "baseline_0's step 2 started +4096 from its step 1"));
    fixture_free(&f);
}

static void a_hook_count_that_is_not_int64_is_an_input_error(void **state)
{
    (void)state;
    struct fixture f;
    struct grads g;
    struct impl_result r;
    float fires[2] = {1, 1};
    init(&f);
    base_grads(&g);
    add_baselines(&f, &g, 0);
    add(&f, "mine", &g);
    add_f32(&f.runs[f.n - 1], "checks/hook_fires/l0.weight", fires, 2);
    assert_int_equal(judge_run(&f.c, f.runs, f.n, "mine", &r), ST_INPUT);
    assert_non_null(strstr(error_message(), "/runs/mine/checks/hook_fires/l0.weight: expected a non-empty int64"));
    impl_result_free(&r);
    fixture_free(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_hook_that_fires_twice_fails_a_run_whose_gradients_match),
        cmocka_unit_test(a_hook_that_never_fires_fails_too),
        cmocka_unit_test(a_step_starting_with_more_live_bytes_than_step_1_fails_as_a_leak),
        cmocka_unit_test(runs_without_hook_or_byte_records_are_not_held_to_them),
        cmocka_unit_test(a_hook_fired_as_often_as_the_baselines_passes),
        cmocka_unit_test(a_hook_firing_fewer_times_than_the_baselines_fails),
        cmocka_unit_test(a_ranks_hook_count_is_held_to_the_same_rank_of_the_baseline),
        cmocka_unit_test(a_hook_count_fail_says_the_gradients_are_right_and_what_breaks),
        cmocka_unit_test(a_hook_count_fail_within_noise_says_the_gradients_are_within_it),
        cmocka_unit_test(a_hook_count_fail_keeps_its_memory_and_time_figures),
        cmocka_unit_test(a_hook_count_the_baseline_lacks_is_held_to_once),
        cmocka_unit_test(a_run_growing_as_much_as_its_baseline_is_no_leak),
        cmocka_unit_test(a_run_growing_more_than_its_baseline_fails_naming_both),
        cmocka_unit_test(a_user_run_allocating_bounded_state_once_is_no_leak),
        cmocka_unit_test(a_user_run_freeing_memory_between_steps_is_no_leak),
        cmocka_unit_test(a_user_run_growing_on_two_consecutive_step_starts_leaks),
        cmocka_unit_test(a_user_run_whose_state_fills_over_two_steps_then_holds_still_is_no_leak),
        cmocka_unit_test(a_user_run_growing_up_to_its_last_step_leaks),
        cmocka_unit_test(a_user_run_growing_at_its_last_step_alone_says_too_few_steps_to_tell),
        cmocka_unit_test(a_hook_count_that_is_not_int64_is_an_input_error),
    };
    return cmocka_run_group_tests(tests, NULL, free_kept_results);
}
