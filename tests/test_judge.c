/* Unit tests for judge: each test builds runs in memory (a bias and a weight
 * gradient, a loss, a final parameter) with noise or bugs of a known kind
 * and pins one rule of the verdict: the per-tensor envelope at the tensor's
 * scale, bitwise tensors staying bitwise, re-runs, missing tensors, the
 * runs' own outcomes and expectations (the memory requirements:
 * test_judge_memory.c; the run checks: test_judge_checks.c). */
#include "judge_fixture.h"

#include <stdio.h>
#include <stdlib.h>

#include "compare.h"
#include "report.h"
#include "run_checks.h"

static void bitwise_identical_run_passes(void **state)
{
    (void)state;
    struct fixture f;
    struct grads g;
    init(&f);
    base_grads(&g);
    add_baselines(&f, &g, 0);
    add(&f, "mine", &g);
    struct impl_result r = judge(&f, "mine");
    assert_int_equal(r.verdict, V_PASS);
    assert_non_null(strstr(text_str(&r.reason), "bitwise identical to baseline_0"));
    assert_true(r.expected);
    fixture_free(&f);
}

static void tensor_whose_baselines_agree_bitwise_must_match_bitwise(void **state)
{
    (void)state;
    struct fixture f;
    struct grads g, one_ulp;
    init(&f);
    base_grads(&g);
    one_ulp = g;
    one_ulp.weight[5] = nextafterf(one_ulp.weight[5], 1.0f);
    add_baselines(&f, &g, 0);
    add(&f, "mine", &one_ulp);
    struct impl_result r = judge(&f, "mine");
    assert_int_equal(r.verdict, V_FAIL);
    assert_true(r.outside_envelope);
    assert_non_null(strstr(text_str(&r.reason), "steps/1/grads/l0.weight: its 2 baselines agree bitwise"));
    assert_non_null(strstr(text_str(&r.first_divergence), "steps/1/grads/l0.weight [5]"));
    fixture_free(&f);
}

static void sign_flips_near_zero_are_noise_not_a_raw_ulp_floor(void **state)
{
    (void)state;
    struct fixture f;
    struct grads g, mine;
    init(&f);
    base_grads(&g);
    mine = g;
    add_noise(&mine, 2);
    add_baselines(&f, &g, 1);
    add(&f, "mine", &mine);
    struct impl_result r = judge(&f, "mine");
    assert_int_equal(r.verdict, V_NOISE);
    /* The element-wise distance across zero is ~2^31 ULP; at the tensor's
     * scale it is a fraction of one. */
    assert_true(r.max_ulp > (1u << 30));
    assert_true(r.max_scaled_ulp < 4);
    fixture_free(&f);
}

static void weight_moved_by_1e_4_relative_fails_despite_sign_flip_noise(void **state)
{
    (void)state;
    struct fixture f;
    struct grads g, mine;
    init(&f);
    base_grads(&g);
    mine = g;
    add_noise(&mine, 2);
    mine.weight[40] *= 1.0f + 1e-4f;
    add_baselines(&f, &g, 1);
    add(&f, "mine", &mine);
    struct impl_result r = judge(&f, "mine");
    assert_int_equal(r.verdict, V_FAIL);
    assert_non_null(strstr(text_str(&r.reason), "steps/1/grads/l0.weight lies outside its noise envelope"));
    assert_non_null(strstr(text_str(&r.first_divergence), "steps/1/grads/l0.weight"));
    assert_false(r.expected);
    fixture_free(&f);
}

/* ---- every attempt (the run and its re-runs) inside the envelope ------------- */

/* A run outside its envelope is a bug however many re-runs land inside:
 * a flaky checkpoint differs in some attempts only. */
static void a_run_outside_fails_though_a_rerun_lies_within(void **state)
{
    (void)state;
    struct fixture f;
    struct grads g, mine, rerun;
    init(&f);
    base_grads(&g);
    mine = g;
    mine.weight[40] *= 1.0f + 1e-4f;
    rerun = g;
    add_noise(&rerun, 3);
    add_baselines(&f, &g, 1);
    add(&f, "mine", &mine);
    add(&f, "mine_rerun_1", &rerun);
    struct impl_result r = judge(&f, "mine");
    assert_int_equal(r.verdict, V_FAIL);
    assert_true(r.outside_envelope);
    assert_non_null(strstr(text_str(&r.reason), "differs in 1 of 2 attempts (the run and 1 re-run(s); the worst, mine): "
                                     "steps/1/grads/l0.weight lies outside its noise envelope"));
    assert_non_null(strstr(text_str(&r.first_divergence), "steps/1/grads/l0.weight [40]"));
    fixture_free(&f);
}

/* The review's planted flaky bug: two bitwise baselines, a run 2.9e6
 * scaled ULP off, a re-run that reproduces baseline_0. */
static void a_flaky_bug_fails_though_a_rerun_reproduces_baseline_0(void **state)
{
    (void)state;
    struct fixture f;
    struct grads g, mine;
    init(&f);
    base_grads(&g);
    mine = g;
    mine.weight[40] += 0.0216f; /* ~2.9e6 ULP at the tensor's scale */
    add_baselines(&f, &g, 0);
    add(&f, "mine", &mine);
    add(&f, "mine_rerun_1", &g);
    struct impl_result r = judge(&f, "mine");
    assert_int_equal(r.verdict, V_FAIL);
    assert_non_null(strstr(text_str(&r.reason), "differs in 1 of 2 attempts"));
    assert_non_null(strstr(text_str(&r.reason), "steps/1/grads/l0.weight: its 2 baselines agree bitwise, mine differs by 2.9e+06 "
                                     "scaled ULP"));
    assert_string_equal(text_str(&r.first_divergence), "steps/1/grads/l0.weight [40] (0.0700000003 vs 0.0916000009; 1 of 64 "
                                            "elements differ)");
    fixture_free(&f);
}

/* Where no baseline ever spread, nothing shows the kernels to be noisy:
 * an impl whose own runs disagree by an ULP is flaky, not noisy. */
static void a_one_ulp_flake_fails_where_the_baselines_never_spread(void **state)
{
    (void)state;
    struct fixture f;
    struct grads g, mine;
    init(&f);
    base_grads(&g);
    mine = g;
    mine.bias[20] = nextafterf(mine.bias[20], 1.0f);
    add_baselines(&f, &g, 0);
    add(&f, "mine", &mine);
    add(&f, "mine_rerun_1", &g);
    struct impl_result r = judge(&f, "mine");
    assert_int_equal(r.verdict, V_FAIL);
    assert_non_null(strstr(text_str(&r.reason), "differs in 1 of 2 attempts"));
    assert_non_null(strstr(text_str(&r.reason), "steps/1/grads/l0.bias: its 2 baselines agree bitwise"));
    fixture_free(&f);
}

static void a_rerun_outside_fails_though_the_run_lies_within(void **state)
{
    (void)state;
    struct fixture f;
    struct grads g, mine, rerun;
    init(&f);
    base_grads(&g);
    mine = g;
    add_noise(&mine, 2);
    rerun = g;
    rerun.weight[40] *= 1.0f + 1e-4f;
    add_baselines(&f, &g, 1);
    add(&f, "mine", &mine);
    add(&f, "mine_rerun_1", &rerun);
    struct impl_result r = judge(&f, "mine");
    assert_int_equal(r.verdict, V_FAIL);
    assert_non_null(strstr(text_str(&r.reason), "differs in 1 of 2 attempts (the run and 1 re-run(s); the worst, mine_rerun_1)"));
    assert_non_null(strstr(text_str(&r.first_divergence), "mine_rerun_1: steps/1/grads/l0.weight [40]"));
    fixture_free(&f);
}

static void a_rerun_that_differs_from_a_bitwise_run_fails(void **state)
{
    (void)state;
    struct fixture f;
    struct grads g, rerun;
    init(&f);
    base_grads(&g);
    rerun = g;
    rerun.weight[5] = nextafterf(rerun.weight[5], 1.0f);
    add_baselines(&f, &g, 0);
    add(&f, "mine", &g);
    add(&f, "mine_rerun_1", &rerun);
    struct impl_result r = judge(&f, "mine");
    assert_int_equal(r.verdict, V_FAIL);
    assert_non_null(strstr(text_str(&r.reason), "its 2 baselines agree bitwise, mine_rerun_1 differs"));
    fixture_free(&f);
}

static void a_rerun_missing_a_tensor_fails_naming_it(void **state)
{
    (void)state;
    struct fixture f;
    struct grads g;
    init(&f);
    base_grads(&g);
    add_baselines(&f, &g, 0);
    add(&f, "mine", &g);
    run_record_init(&f.runs[f.n], "mine_rerun_1");
    add_f32(&f.runs[f.n], "steps/1/loss", &g.loss, 1);
    add_f32(&f.runs[f.n], "steps/1/grads/l0.weight", g.weight, N);
    add_f32(&f.runs[f.n], "final_params/l0.weight", g.weight, N);
    f.n++;
    struct impl_result r = judge(&f, "mine");
    assert_int_equal(r.verdict, V_FAIL);
    assert_false(r.outside_envelope); /* no more samples make a tensor appear */
    assert_non_null(strstr(text_str(&r.reason), "steps/1/grads/l0.bias is recorded by baseline_0 but not by mine_rerun_1"));
    assert_string_equal(text_str(&r.first_divergence), "mine_rerun_1: steps/1/grads/l0.bias missing in mine_rerun_1");
    fixture_free(&f);
}

static void every_attempt_outside_is_counted(void **state)
{
    (void)state;
    struct fixture f;
    struct grads g, mine;
    init(&f);
    base_grads(&g);
    mine = g;
    mine.weight[40] *= 1.0f + 1e-4f;
    add_baselines(&f, &g, 1);
    add(&f, "mine", &mine);
    add(&f, "mine_rerun_1", &mine);
    add(&f, "mine_rerun_2", &g);
    struct impl_result r = judge(&f, "mine");
    assert_int_equal(r.verdict, V_FAIL);
    assert_non_null(strstr(text_str(&r.reason), "differs in 2 of 3 attempts (the run and 2 re-run(s)"));
    fixture_free(&f);
}

/* The first divergence is the farthest attempt's, whichever came first. */
static void the_farthest_attempt_gives_the_first_divergence(void **state)
{
    (void)state;
    struct fixture f;
    struct grads g, near, far;
    init(&f);
    base_grads(&g);
    near = g;
    near.weight[40] *= 1.0f + 1e-4f;
    far = g;
    far.weight[41] += 0.01f;
    add_baselines(&f, &g, 1);
    add(&f, "mine", &near);
    add(&f, "mine_rerun_1", &far);
    struct impl_result r = judge(&f, "mine");
    assert_int_equal(r.verdict, V_FAIL);
    assert_non_null(strstr(text_str(&r.reason), "the worst, mine_rerun_1"));
    assert_non_null(strstr(text_str(&r.first_divergence), "mine_rerun_1: steps/1/grads/l0.weight [41]"));
    fixture_free(&f);
}

/* Kernel noise in every attempt, each within its envelope, stays NOISE
 * and the reason says every attempt was judged. */
static void kernel_noise_within_in_every_attempt_is_noise(void **state)
{
    (void)state;
    struct fixture f;
    struct grads g, mine, rerun;
    init(&f);
    base_grads(&g);
    mine = g;
    add_noise(&mine, 2);
    rerun = g;
    add_noise(&rerun, 3);
    add_baselines(&f, &g, 1);
    add(&f, "mine", &mine);
    add(&f, "mine_rerun_1", &rerun);
    struct impl_result r = judge(&f, "mine");
    assert_int_equal(r.verdict, V_NOISE);
    assert_non_null(strstr(text_str(&r.reason), "over 2 baselines in all 2 attempts (the run and 1 re-run(s))"));
    fixture_free(&f);
}

static void a_run_and_reruns_all_bitwise_pass(void **state)
{
    (void)state;
    struct fixture f;
    struct grads g;
    init(&f);
    base_grads(&g);
    add_baselines(&f, &g, 0);
    add(&f, "mine", &g);
    add(&f, "mine_rerun_1", &g);
    struct impl_result r = judge(&f, "mine");
    assert_int_equal(r.verdict, V_PASS);
    assert_non_null(strstr(text_str(&r.reason), "in all 2 attempts"));
    fixture_free(&f);
}

/* A re-run that did not complete has no tensors to judge: the run's own
 * verdict stands. */
static void a_rerun_that_did_not_complete_is_not_an_attempt(void **state)
{
    (void)state;
    struct fixture f;
    struct grads g, bad;
    init(&f);
    base_grads(&g);
    bad = g;
    bad.weight[0] = -bad.weight[0];
    add_baselines(&f, &g, 0);
    add(&f, "mine", &g);
    add(&f, "mine_rerun_1", &bad);
    snprintf(f.runs[f.n - 1].outcome, sizeof f.runs[f.n - 1].outcome, RUN_OUTCOME_ERROR);
    assert_int_equal(judge(&f, "mine").verdict, V_PASS);
    fixture_free(&f);
}

/* Baselines that agree on a tensor prove nothing when the impl's own
 * samples of it disagree and the baselines spread elsewhere in the case
 * (the kernels are shown non-deterministic): the least envelope. */
static void impl_samples_that_disagree_make_a_bitwise_tensor_noisy_where_the_baselines_spread(void **state)
{
    (void)state;
    struct fixture f;
    struct grads g, mine, rerun;
    init(&f);
    base_grads(&g);
    mine = g;
    mine.loss = nextafterf(mine.loss, 1.0f); /* an atomic sum landing otherwise */
    rerun = g;
    rerun.loss = nextafterf(rerun.loss, -1.0f);
    add_baselines(&f, &g, 1); /* the gradients spread; the loss happened to agree */
    add(&f, "mine", &mine);
    add(&f, "mine_rerun_1", &rerun);
    struct impl_result r = judge(&f, "mine");
    assert_int_equal(r.verdict, V_NOISE);
    assert_non_null(strstr(text_str(&r.reason), "1 vary between this impl's own runs"));
    fixture_free(&f);
}

static void impl_samples_that_agree_keep_a_bitwise_tensor_strict(void **state)
{
    (void)state;
    struct fixture f;
    struct grads g, mine;
    init(&f);
    base_grads(&g);
    mine = g;
    mine.loss = nextafterf(mine.loss, 1.0f); /* the same one-ULP change every time: a bug */
    add_baselines(&f, &g, 1);
    add(&f, "mine", &mine);
    add(&f, "mine_rerun_1", &mine);
    assert_int_equal(judge(&f, "mine").verdict, V_FAIL);
    fixture_free(&f);
}

static void impl_samples_that_disagree_do_not_excuse_a_large_difference(void **state)
{
    (void)state;
    struct fixture f;
    struct grads g, mine, rerun;
    init(&f);
    base_grads(&g);
    mine = g;
    mine.loss *= 1.5f; /* a bug that also varies from run to run */
    rerun = g;
    rerun.loss *= 0.5f;
    add_baselines(&f, &g, 1); /* the gradients spread; the loss agrees */
    add(&f, "mine", &mine);
    add(&f, "mine_rerun_1", &rerun);
    assert_int_equal(judge(&f, "mine").verdict, V_FAIL);
    fixture_free(&f);
}

/* One element of a recorded tensor moved by one ULP, in place. */
static void nudge(struct run_record *r, const char *path, int i)
{
    const struct run_tensor *t = run_record_find(r, path);
    assert_non_null(t);
    float *v = t->t.data;
    v[i] = nextafterf(v[i], 1.0f);
}

static void tensor_after_a_noisy_step_gets_the_least_envelope(void **state)
{
    (void)state;
    struct fixture f;
    struct grads g, b1, mine;
    init(&f);
    base_grads(&g);
    b1 = g;
    b1.bias[3] = -b1.bias[3]; /* step 1 is noisy in the baselines */
    mine = g;
    add(&f, "baseline_0", &g);
    add(&f, "baseline_1", &b1);
    add(&f, "mine", &mine);
    nudge(&f.runs[2], "final_params/l0.weight", 9); /* computed after that step */
    struct impl_result r = judge(&f, "mine");
    assert_int_equal(r.verdict, V_NOISE);
    assert_non_null(strstr(text_str(&r.reason), "1 come after a step where noise showed"));
    nudge(&f.runs[2], "steps/1/grads/l0.weight", 9); /* the noisy step itself: still strict */
    assert_int_equal(judge(&f, "mine").verdict, V_FAIL);
    fixture_free(&f);
}

static void tensor_on_one_side_only_fails_naming_the_side(void **state)
{
    (void)state;
    struct fixture f;
    struct grads g;
    init(&f);
    base_grads(&g);
    add(&f, "baseline_0", &g);
    run_record_init(&f.runs[f.n], "mine");
    add_f32(&f.runs[f.n], "steps/1/loss", &g.loss, 1);
    add_f32(&f.runs[f.n], "steps/1/grads/l0.weight", g.weight, N);
    add_f32(&f.runs[f.n], "final_params/l0.weight", g.weight, N);
    f.n++;
    struct impl_result r = judge(&f, "mine");
    assert_int_equal(r.verdict, V_FAIL);
    assert_string_equal(text_str(&r.first_divergence), "steps/1/grads/l0.bias missing in mine");
    assert_non_null(strstr(text_str(&r.reason), "recorded by baseline_0 but not by mine"));
    fixture_free(&f);
}

/* A FAIL decided by a missing tensor shows what decided it where the
 * distance stands, never the distance of the tensors that were there
 * (here the weight differs too: its distance is not what failed). */
static void a_fail_decided_by_a_missing_tensor_shows_that_not_a_distance(void **state)
{
    (void)state;
    struct fixture f;
    struct grads g;
    init(&f);
    base_grads(&g);
    add_baselines(&f, &g, 0);
    struct grads moved = g;
    moved.weight[40] = nextafterf(moved.weight[40], 1.0f);
    run_record_init(&f.runs[f.n], "mine");
    add_f32(&f.runs[f.n], "steps/1/loss", &g.loss, 1);
    add_f32(&f.runs[f.n], "steps/1/grads/l0.weight", moved.weight, N);
    add_f32(&f.runs[f.n], "final_params/l0.weight", moved.weight, N);
    f.n++;
    struct impl_result r = judge(&f, "mine");
    assert_int_equal(r.verdict, V_FAIL);
    assert_string_equal(r.decided_by, "missing tensor");
    assert_true(isnan(report_verdict_distance(&r)));
    struct case_result cr;
    memset(&cr, 0, sizeof cr);
    snprintf(cr.name, sizeof cr.name, "k");
    cr.n_results = 1;
    cr.results[0] = r;
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    assert_non_null(mem);
    report_print_case(mem, &cr);
    fclose(mem);
    const char *at = strstr(text, "\n  mine ");
    assert_non_null(at);
    char *row = strndup(at + 1, strcspn(at + 1, "\n"));
    assert_non_null(strstr(row, "FAIL"));
    assert_non_null(strstr(row, " missing tensor "));
    assert_null(strstr(row, " 0  ")); /* no distance of 0 in the ULP column */
    free(row);
    free(text);
    fixture_free(&f);
}

/* An overhead below 1 is marked as unstable: a checkpoint never makes
 * the step faster than its baseline's. */
static void an_overhead_below_one_is_marked_unstable(void **state)
{
    (void)state;
    struct fixture f;
    struct grads g;
    init(&f);
    base_grads(&g);
    add_baselines(&f, &g, 0);
    add(&f, "mine", &g);
    run_record_set_attr(&f.runs[f.n - 1], "timing.step_ms", 0.27);
    struct impl_result r = judge(&f, "mine");
    assert_int_equal(r.verdict, V_PASS);
    assert_true(fabs(r.overhead - 0.27) < 1e-9);
    assert_false(r.timing_stable);
    assert_non_null(strstr(r.timing_note, "below 1"));
    fixture_free(&f);
}

/* A run whose own steps spread wider than the baselines may is marked,
 * however well its baselines agree; one whose steps agree is not. */
static void a_run_whose_own_steps_spread_is_marked_unstable(void **state)
{
    (void)state;
    struct fixture f;
    struct grads g;
    init(&f);
    base_grads(&g);
    add_baselines(&f, &g, 0);
    add(&f, "steady", &g);
    run_record_set_attr(&f.runs[f.n - 1], "timing.step_ms", 1.3);
    run_record_set_attr(&f.runs[f.n - 1], "timing.fastest_step_ms", 1.2);
    run_record_set_attr(&f.runs[f.n - 1], "timing.slowest_step_ms", 1.4);
    add(&f, "spread", &g);
    run_record_set_attr(&f.runs[f.n - 1], "timing.step_ms", 1.3);
    run_record_set_attr(&f.runs[f.n - 1], "timing.fastest_step_ms", 1.0);
    run_record_set_attr(&f.runs[f.n - 1], "timing.slowest_step_ms", 3.0);
    struct impl_result steady = judge(&f, "steady"), spread = judge(&f, "spread");
    assert_true(steady.timing_stable);
    assert_string_equal(steady.timing_note, "");
    assert_false(spread.timing_stable);
    assert_non_null(strstr(spread.timing_note, "own step times spread 3.00x"));
    fixture_free(&f);
}

/* A step that paid a one-time cost (torch's first call inside an external
 * producer's step: 1.3 s against 0.6 ms) makes the median meaningless: no
 * overhead is shown, and the note says why, with the two step times. */
static void a_run_whose_own_steps_spread_tenfold_shows_no_overhead(void **state)
{
    (void)state;
    struct fixture f;
    struct grads g;
    init(&f);
    base_grads(&g);
    add_baselines(&f, &g, 0);
    add(&f, "first_call", &g);
    run_record_set_attr(&f.runs[f.n - 1], "timing.step_ms", 660.3);
    run_record_set_attr(&f.runs[f.n - 1], "timing.fastest_step_ms", 0.6);
    run_record_set_attr(&f.runs[f.n - 1], "timing.slowest_step_ms", 1320.0);
    struct impl_result r = judge(&f, "first_call");
    assert_int_equal(r.verdict, V_PASS);
    assert_true(isnan(r.overhead));
    assert_true(r.overhead_withheld);
    assert_false(r.timing_stable);
    assert_non_null(strstr(r.timing_note, "the run's own steps took 0.6 to 1.32e+03 ms (2200x): a one-time cost"));
    /* the table says so where the ratio would stand */
    static struct case_result c;
    memset(&c, 0, sizeof c);
    snprintf(c.name, sizeof c.name, "k");
    c.n_results = 1;
    c.results[0] = r;
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    report_print_case(mem, &c);
    fclose(mem);
    assert_non_null(strstr(text, "overhead not shown: the run's own steps took"));
    assert_null(strstr(text, "x?"));
    free(text);
    fixture_free(&f);
}

static void run_outcomes_become_error_and_fail(void **state)
{
    (void)state;
    struct fixture f;
    struct grads g;
    init(&f);
    base_grads(&g);
    add(&f, "baseline_0", &g);
    add(&f, "crashed", &g);
    add(&f, "checked", &g);
    snprintf(f.runs[1].outcome, sizeof f.runs[1].outcome, RUN_OUTCOME_ERROR);
    text_setf(&f.runs[1].message, "out of memory");
    snprintf(f.runs[2].outcome, sizeof f.runs[2].outcome, RUN_OUTCOME_CHECK_FAILED);
    text_setf(&f.runs[2].message, "recomputed tensor #0 differs");
    struct impl_result crashed = judge(&f, "crashed"), checked = judge(&f, "checked");
    assert_int_equal(crashed.verdict, V_ERROR);
    assert_string_equal(text_str(&crashed.reason), "out of memory");
    assert_int_equal(checked.verdict, V_FAIL);
    assert_non_null(strstr(text_str(&checked.reason), "the checkpoint's own check failed: recomputed tensor #0 differs"));
    assert_true(isnan(checked.memory_saved)); /* a FAIL's figures are not savings */
    fixture_free(&f);
}

static void a_planted_bug_recorded_as_not_observable_that_matched_is_not_observable(void **state)
{
    (void)state;
    struct fixture f;
    struct grads g;
    init(&f);
    base_grads(&g);
    add(&f, "baseline_0", &g);
    add(&f, "no_rng_stash", &g);
    struct run_record *bug = &f.runs[f.n - 1];
    snprintf(bug->role, sizeof bug->role, "%s", RUN_ROLE_PLANTED_BUG);
    text_setf(&bug->not_observable, "dropout = 0: nothing to replay");
    struct impl_result r = judge(&f, "no_rng_stash");
    assert_int_equal(r.verdict, V_NOT_OBSERVABLE);
    assert_true(r.expected);
    assert_non_null(strstr(text_str(&r.reason), "planted bug cannot show here (dropout = 0: nothing to replay)"));
    /* The same run with no role recorded is a checkpoint that matched. */
    bug->role[0] = '\0';
    assert_int_equal(judge(&f, "no_rng_stash").verdict, V_PASS);
    fixture_free(&f);
}

static void expectations_default_to_pass_unless_the_run_is_recorded_as_a_planted_bug(void **state)
{
    (void)state;
    struct fixture f;
    struct grads g, bad;
    init(&f);
    base_grads(&g);
    bad = g;
    bad.weight[0] = -bad.weight[0];
    add(&f, "baseline_0", &g);
    add(&f, "my_planted", &bad);
    /* A harness planted bug's name is not what makes it one: its recorded
     * role is (the torch-free judge knows no impl). */
    add(&f, "no_rng_stash", &bad);
    assert_false(judge(&f, "no_rng_stash").expected);
    snprintf(f.runs[f.n - 1].role, sizeof f.runs[f.n - 1].role, "%s", RUN_ROLE_PLANTED_BUG);
    assert_false(judge(&f, "my_planted").expected);
    assert_true(judge(&f, "no_rng_stash").expected);
    f.c.n_expect = 1;
    snprintf(f.c.expect[0].impl, sizeof f.c.expect[0].impl, "my_planted");
    f.c.expect[0].verdict_mask = 1u << V_FAIL;
    assert_true(judge(&f, "my_planted").expected);
    fixture_free(&f);
}

static void declared_tolerance_turns_a_small_difference_into_pass(void **state)
{
    (void)state;
    struct fixture f;
    struct grads g, near;
    init(&f);
    base_grads(&g);
    near = g;
    near.weight[5] = nextafterf(nextafterf(near.weight[5], 1.0f), 1.0f);
    add(&f, "baseline_0", &g);
    add(&f, "mine", &near);
    f.c.tolerance = 2;
    assert_int_equal(judge(&f, "mine").verdict, V_PASS);
    f.c.tolerance = 1;
    assert_int_equal(judge(&f, "mine").verdict, V_FAIL);
    fixture_free(&f);
}

static void judging_needs_baseline_0(void **state)
{
    (void)state;
    struct fixture f;
    struct grads g;
    struct impl_result r;
    init(&f);
    base_grads(&g);
    add(&f, "baseline_1", &g);
    add(&f, "mine", &g);
    assert_int_equal(judge_run(&f.c, f.runs, f.n, "mine", &r), ST_INPUT);
    assert_non_null(strstr(error_message(), "/runs/baseline_0: run missing"));
    impl_result_free(&r);
    fixture_free(&f);
}

static void baselines_that_record_different_tensors_are_input_errors(void **state)
{
    (void)state;
    struct fixture f;
    struct grads g, mine;
    struct impl_result r;
    init(&f);
    base_grads(&g);
    mine = g;
    mine.loss = 0.5f;
    add(&f, "baseline_0", &g);
    run_record_init(&f.runs[f.n], "baseline_1");
    add_f32(&f.runs[f.n++], "steps/1/grads/l0.weight", g.weight, N); /* no loss */
    add(&f, "mine", &mine);
    assert_int_equal(judge_run(&f.c, f.runs, f.n, "mine", &r), ST_INPUT);
    assert_non_null(strstr(error_message(), "/runs/baseline_1/steps/1/loss: missing"));
    impl_result_free(&r);
    fixture_free(&f);
}

static void case_judges_each_run_once_in_order_and_not_reruns(void **state)
{
    (void)state;
    struct fixture f;
    struct grads g;
    struct case_result *out = calloc(1, sizeof *out);
    char order[1][CASE_WORD_MAX] = {"second"};
    init(&f);
    base_grads(&g);
    add_baselines(&f, &g, 0);
    add(&f, "first", &g);
    add(&f, "first_rerun_1", &g);
    add(&f, "second", &g);
    assert_ok(judge_case(&f.c, f.runs, f.n, (const char (*)[CASE_WORD_MAX])order, 1, out));
    assert_int_equal(out->n_results, 2);
    assert_string_equal(out->results[0].impl, "second");
    assert_string_equal(out->results[1].impl, "first");
    assert_int_equal(out->baseline_runs, 2);
    case_result_free(out);
    free(out);
    fixture_free(&f);
}

static void run_is_judged_against_the_baseline_family_it_names(void **state)
{
    (void)state;
    struct fixture f;
    struct grads ours, theirs;
    init(&f);
    base_grads(&ours);
    theirs = ours;
    theirs.weight[0] = nextafterf(theirs.weight[0], 1.0f); /* another framework's kernels */
    add(&f, "baseline_0", &ours);
    add(&f, "baseline_1", &ours);
    add(&f, "torch_baseline_0", &theirs);
    add(&f, "torch_baseline_1", &theirs);
    add(&f, "torch_reentrant", &theirs);
    snprintf(f.runs[4].baselines, sizeof f.runs[4].baselines, "torch_baseline");
    struct impl_result r = judge(&f, "torch_reentrant");
    assert_int_equal(r.verdict, V_PASS);
    assert_non_null(strstr(text_str(&r.reason), "bitwise identical to torch_baseline_0"));
    f.runs[4].baselines[0] = '\0'; /* against ours it differs */
    assert_int_equal(judge(&f, "torch_reentrant").verdict, V_FAIL);
    struct case_result *out = calloc(1, sizeof *out);
    snprintf(f.runs[4].baselines, sizeof f.runs[4].baselines, "torch_baseline");
    assert_ok(judge_case(&f.c, f.runs, f.n, NULL, 0, out));
    assert_int_equal(out->n_results, 1); /* the torch baselines are baselines, not judged */
    assert_int_equal(out->baseline_runs, 2);
    case_result_free(out);
    free(out);
    fixture_free(&f);
}

/* A compiled run and its twin against eager (families.py): the twin is the
 * run's tensors, judged again against compiled_or_eager_baseline. `twin`
 * are the tensors the fixture gives the twin. */
static struct case_result *judge_with_twin(struct fixture *f, const struct grads *run, const struct grads *twin)
{
    struct grads g;
    struct case_result *out = calloc(1, sizeof *out);
    base_grads(&g);
    add_baselines(f, &g, 0);
    add(f, "compiled_or_eager_baseline_0", &g);
    add(f, "compiled_or_eager_baseline_1", &g);
    add(f, "mine", run);
    add(f, "mine_vs_eager", twin);
    struct run_record *t = &f->runs[f->n - 1];
    snprintf(t->baselines, sizeof t->baselines, "compiled_or_eager_baseline");
    snprintf(t->twin_of, sizeof t->twin_of, "mine");
    assert_ok(judge_case(&f->c, f->runs, f->n, NULL, 0, out));
    assert_int_equal(out->n_results, 2);
    assert_string_equal(out->results[1].impl, "mine_vs_eager");
    return out;
}

/* Runs with an int64 buffer (a BatchNorm's num_batches_tracked) in step
 * 1: baseline_0 and baseline_1 count 1, "mine" counts `mine`. */
static void add_count(struct run_record *r, int64_t count)
{
    struct host_tensor t;
    assert_ok(host_tensor_alloc(&t, DT_I64, 0, NULL));
    memcpy(t.data, &count, sizeof count);
    assert_ok(run_record_add(r, "steps/1/buffers/bn.num_batches_tracked", &t));
}

static void counted_run(struct fixture *f, const char *name, const struct grads *g, int64_t count)
{
    struct run_record *r = &f->runs[f->n++];
    run_record_init(r, name);
    add_count(r, count); /* first in recorded order: the first divergence when it differs */
    add_f32(r, "steps/1/loss", &g->loss, 1);
    add_f32(r, "steps/1/grads/l0.bias", g->bias, N);
    add_f32(r, "steps/1/grads/l0.weight", g->weight, N);
    add_f32(r, "final_params/l0.weight", g->weight, N);
}

static void counted_runs(struct fixture *f, int64_t mine, const struct grads *mine_grads)
{
    struct grads g;
    init(f);
    base_grads(&g);
    counted_run(f, "baseline_0", &g, 1);
    counted_run(f, "baseline_1", &g, 1);
    counted_run(f, "mine", mine_grads ? mine_grads : &g, mine);
}

/* Integer tensors are counts: one that differs is described by its values,
 * never in ULPs, and the run's scaled ULP figures are the floating
 * tensors' alone. */
static void an_integer_buffer_that_differs_is_described_as_values_not_ulps(void **state)
{
    (void)state;
    struct fixture f;
    counted_runs(&f, 2, NULL);
    struct impl_result r = judge(&f, "mine");
    assert_int_equal(r.verdict, V_FAIL);
    assert_non_null(strstr(text_str(&r.reason), "steps/1/buffers/bn.num_batches_tracked: its 2 baselines agree bitwise, "
                                     "mine's values differ: 1 vs 2 (1 of 1 elements differ, by up to 1; an integer "
                                     "tensor, compared as values)"));
    assert_null(strstr(text_str(&r.reason), "ULP"));
    assert_non_null(strstr(text_str(&r.first_divergence), "steps/1/buffers/bn.num_batches_tracked [] (1 vs 2;"));
    assert_true(r.max_scaled_ulp == 0 && r.max_ulp == 0);
    assert_int_equal(r.n_tensor_distances, 1);
    assert_true(r.tensor_distances[0].values);
    fixture_free(&f);
}

/* With floating tensors differing too, the reason gives their scaled ULP
 * apart from the count's values. */
static void an_integer_buffer_beside_a_moved_weight_keeps_the_two_measures_apart(void **state)
{
    (void)state;
    struct fixture f;
    struct grads bug;
    base_grads(&bug);
    bug.weight[40] *= 1.5f;
    counted_runs(&f, 2, &bug);
    struct impl_result r = judge(&f, "mine");
    assert_int_equal(r.verdict, V_FAIL);
    assert_true(r.max_scaled_ulp > 1000);
    assert_non_null(strstr(text_str(&r.reason), "an integer tensor, compared as values); floating tensors: max scaled ULP "));
    fixture_free(&f);
}

/* A tolerance is in ULPs: it never lets integer values that differ pass. */
static void a_tolerance_never_covers_integer_values_that_differ(void **state)
{
    (void)state;
    struct fixture f;
    counted_runs(&f, 2, NULL);
    f.c.tolerance = 1000;
    struct impl_result r = judge(&f, "mine");
    assert_int_equal(r.verdict, V_FAIL);
    fixture_free(&f);
}

/* The run's own FAIL is the finding and explains any difference from the
 * mixed family: the twin keeps its measured verdict, is not judged, and
 * cannot make the report fail. */
static void a_twin_whose_run_fails_is_not_judged(void **state)
{
    (void)state;
    struct fixture f;
    struct grads bug;
    init(&f);
    base_grads(&bug);
    bug.weight[40] *= 1.5f;
    struct case_result *out = judge_with_twin(&f, &bug, &bug);
    const struct impl_result *twin = &out->results[1];
    assert_int_equal(out->results[0].verdict, V_FAIL);
    assert_int_equal(twin->verdict, V_FAIL);
    assert_true(twin->expected);
    assert_true(twin->not_judged); /* reports show n/j, not the FAIL measured */
    assert_false(out->results[0].not_judged);
    assert_string_equal(text_str(&twin->reason), "not judged: mine is itself FAIL against baseline_0 (unexpected), which "
                                      "explains any difference from this family (measured here: FAIL)");
    case_result_free(out);
    free(out);
    fixture_free(&f);
}

/* A twin FAILed while its run is right against its own family says first
 * what it compared: the mixed family's plain runs, not a checkpoint bug
 * found within the run's own family. */
static void a_judged_twins_fail_opens_with_what_it_compares(void **state)
{
    (void)state;
    struct fixture f;
    struct grads g, off;
    init(&f);
    base_grads(&g);
    off = g;
    off.weight[40] *= 1.5f;
    struct case_result *out = judge_with_twin(&f, &g, &off);
    const struct impl_result *twin = &out->results[1];
    assert_int_equal(out->results[0].verdict, V_PASS);
    assert_int_equal(twin->verdict, V_FAIL);
    assert_false(twin->expected);
    const char *want = "mine, itself PASS against baseline_0, judged again against compiled_or_eager_baseline_<k> "
                       "(the plain runs of its family and of another), further from them than they are from each "
                       "other: differs in 1 of 1 attempts: steps/1/grads/l0.weight";
    assert_true(strncmp(text_str(&twin->reason), want, strlen(want)) == 0);
    case_result_free(out);
    free(out);
    fixture_free(&f);
}

static void run_names_are_classified_exactly(void **state)
{
    (void)state;
    assert_true(judge_is_baseline("baseline_0"));
    assert_true(judge_is_baseline("baseline_12"));
    assert_false(judge_is_baseline("baseline_"));
    assert_false(judge_is_baseline("baseline_x"));
    assert_true(judge_is_baseline("torch_baseline_0"));
    assert_false(judge_is_baseline("mybaseline_0"));
    assert_true(judge_is_baseline_of("torch_baseline_1", "torch_baseline"));
    assert_false(judge_is_baseline_of("baseline_1", "torch_baseline"));
    assert_false(judge_is_baseline_of("torch_baseline_1", "baseline"));
    assert_true(judge_is_rerun_of("reentrant_rerun_3", "reentrant"));
    assert_false(judge_is_rerun_of("reentrant_rerun_", "reentrant"));
    assert_false(judge_is_rerun_of("nonreentrant_rerun_1", "reentrant"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(bitwise_identical_run_passes),
        cmocka_unit_test(tensor_whose_baselines_agree_bitwise_must_match_bitwise),
        cmocka_unit_test(sign_flips_near_zero_are_noise_not_a_raw_ulp_floor),
        cmocka_unit_test(weight_moved_by_1e_4_relative_fails_despite_sign_flip_noise),
        cmocka_unit_test(a_run_outside_fails_though_a_rerun_lies_within),
        cmocka_unit_test(a_flaky_bug_fails_though_a_rerun_reproduces_baseline_0),
        cmocka_unit_test(a_one_ulp_flake_fails_where_the_baselines_never_spread),
        cmocka_unit_test(a_rerun_outside_fails_though_the_run_lies_within),
        cmocka_unit_test(a_rerun_that_differs_from_a_bitwise_run_fails),
        cmocka_unit_test(a_rerun_missing_a_tensor_fails_naming_it),
        cmocka_unit_test(every_attempt_outside_is_counted),
        cmocka_unit_test(the_farthest_attempt_gives_the_first_divergence),
        cmocka_unit_test(kernel_noise_within_in_every_attempt_is_noise),
        cmocka_unit_test(a_run_and_reruns_all_bitwise_pass),
        cmocka_unit_test(a_rerun_that_did_not_complete_is_not_an_attempt),
        cmocka_unit_test(impl_samples_that_disagree_make_a_bitwise_tensor_noisy_where_the_baselines_spread),
        cmocka_unit_test(impl_samples_that_agree_keep_a_bitwise_tensor_strict),
        cmocka_unit_test(impl_samples_that_disagree_do_not_excuse_a_large_difference),
        cmocka_unit_test(tensor_after_a_noisy_step_gets_the_least_envelope),
        cmocka_unit_test(tensor_on_one_side_only_fails_naming_the_side),
        cmocka_unit_test(a_fail_decided_by_a_missing_tensor_shows_that_not_a_distance),
        cmocka_unit_test(an_overhead_below_one_is_marked_unstable),
        cmocka_unit_test(a_run_whose_own_steps_spread_is_marked_unstable),
        cmocka_unit_test(run_outcomes_become_error_and_fail),
        cmocka_unit_test(a_planted_bug_recorded_as_not_observable_that_matched_is_not_observable),
        cmocka_unit_test(expectations_default_to_pass_unless_the_run_is_recorded_as_a_planted_bug),
        cmocka_unit_test(declared_tolerance_turns_a_small_difference_into_pass),
        cmocka_unit_test(judging_needs_baseline_0),
        cmocka_unit_test(baselines_that_record_different_tensors_are_input_errors),
        cmocka_unit_test(case_judges_each_run_once_in_order_and_not_reruns),
        cmocka_unit_test(run_is_judged_against_the_baseline_family_it_names),
        cmocka_unit_test(a_twin_whose_run_fails_is_not_judged),
        cmocka_unit_test(a_run_whose_own_steps_spread_tenfold_shows_no_overhead),
        cmocka_unit_test(an_integer_buffer_that_differs_is_described_as_values_not_ulps),
        cmocka_unit_test(an_integer_buffer_beside_a_moved_weight_keeps_the_two_measures_apart),
        cmocka_unit_test(a_tolerance_never_covers_integer_values_that_differ),
        cmocka_unit_test(a_judged_twins_fail_opens_with_what_it_compares),
        cmocka_unit_test(run_names_are_classified_exactly),
    };
    return cmocka_run_group_tests(tests, NULL, free_kept_results);
}
