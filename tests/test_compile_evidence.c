/* Unit tests for compile_evidence (the judge's reading of torch.compile's
 * evidence, the compile.* attributes of a run): each test builds a compiled
 * baseline (family "compiled_baseline") and a run whose gradients agree
 * bitwise, gives them the attributes python/ckpt_verify/compile_evidence.py
 * records, and pins one rule in each direction: a recompute the partitioner
 * dropped is MEMFAIL naming torch.compile, saved bytes no fewer than the
 * compiled baseline's are MEMFAIL, a kept recompute that saves is PASS with
 * its figures, a partly dropped one is a finding, and a run without the
 * evidence, or one that fails on its gradients, is judged as before. */
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

struct fixture {
    struct ckpt_case c;
    struct run_record runs[2];
};

static void make_run(struct run_record *r, const char *name)
{
    static const float loss = 0.5f, grad[4] = {0.25f, -1.0f, 3.0f, 1e-9f};
    struct host_tensor t;
    int64_t shape[1] = {4};
    run_record_init(r, name);
    snprintf(r->baselines, sizeof r->baselines, "compiled_baseline");
    assert_ok(host_tensor_alloc(&t, DT_F32, 0, NULL));
    memcpy(t.data, &loss, sizeof loss);
    assert_ok(run_record_add(r, "steps/1/loss", &t));
    assert_ok(host_tensor_alloc(&t, DT_F32, 1, shape));
    memcpy(t.data, grad, sizeof grad);
    assert_ok(run_record_add(r, "steps/1/grads/w", &t));
    run_record_set_attr(r, "timing.step_ms", 1.0);
    run_record_set_attr(r, "compile.activation_memory_budget", 1.0);
    run_record_set_attr(r, "compile.cse", 1);
    run_record_set_attr(r, "compile.graph_breaks", 0);
}

static void set_evidence(struct run_record *r, int regions, int recomputed, int ops, int tensors, double bytes)
{
    run_record_set_attr(r, "compile.ckpt_regions", regions);
    run_record_set_attr(r, "compile.ckpt_regions_recomputed", recomputed);
    run_record_set_attr(r, "compile.recompute_ops", ops);
    run_record_set_attr(r, "compile.saved_activation_tensors", tensors);
    run_record_set_attr(r, "compile.saved_activation_bytes", bytes);
}

/* compiled_baseline_0: plain (no region), 24 tensors / 2629632 bytes saved;
 * "mine": `regions` checkpoint regions, `recomputed` of them recomputed. */
static void setup(struct fixture *f, int regions, int recomputed, int ops, int tensors, double bytes)
{
    memset(f, 0, sizeof *f);
    case_defaults(&f->c);
    make_run(&f->runs[0], "compiled_baseline_0");
    set_evidence(&f->runs[0], 0, 0, 0, 24, 2629632);
    make_run(&f->runs[1], "mine");
    set_evidence(&f->runs[1], regions, recomputed, ops, tensors, bytes);
}

static struct impl_result judge(struct fixture *f)
{
    struct impl_result res;
    assert_ok(judge_run(&f->c, f->runs, 2, "mine", &res));
    run_record_free(&f->runs[0]);
    run_record_free(&f->runs[1]);
    return keep_result(res); /* its texts freed with the group (kept_results.h) */
}

static void recompute_dropped_by_the_partitioner_is_memfail_naming_torch_compile(void **state)
{
    (void)state;
    struct fixture f;
    setup(&f, 4, 0, 0, 24, 2629632);
    struct impl_result r = judge(&f);
    assert_int_equal(r.verdict, V_MEMFAIL);
    assert_non_null(strstr(text_str(&r.reason), "gradients right, but torch.compile saved 24 activation tensor(s) / 2629632 "
                                     "bytes for backward (the compiled baseline's 2629632) and recomputed nothing: "
                                     "the recompute of 4 of 4 checkpoint region(s) was dropped by the partitioner "
                                     "(activation_memory_budget 1, CSE on)"));
}

static void recompute_dropped_is_memfail_even_when_fewer_bytes_are_saved(void **state)
{
    (void)state;
    struct fixture f;
    setup(&f, 2, 0, 0, 10, 1000000);
    struct impl_result r = judge(&f);
    assert_int_equal(r.verdict, V_MEMFAIL);
    assert_non_null(strstr(text_str(&r.reason), "the recompute of 2 of 2 checkpoint region(s) was dropped"));
}

static void saved_bytes_no_fewer_than_the_compiled_baseline_is_memfail(void **state)
{
    (void)state;
    struct fixture f;
    setup(&f, 4, 2, 20, 26, 2629632);
    struct impl_result r = judge(&f);
    assert_int_equal(r.verdict, V_MEMFAIL);
    assert_non_null(strstr(text_str(&r.reason), "torch.compile saved 26 activation tensor(s) / 2629632 bytes for backward, "
                                     "no fewer than the compiled baseline's 2629632: the recompute of 2 of 4 "
                                     "checkpoint region(s) was dropped by the partitioner, 20 op(s) recomputed in "
                                     "the rest"));
}

static void kept_recompute_that_saves_passes_with_its_figures(void **state)
{
    (void)state;
    struct fixture f;
    setup(&f, 4, 4, 39, 3, 196608);
    struct impl_result r = judge(&f);
    assert_int_equal(r.verdict, V_PASS);
    assert_non_null(strstr(text_str(&r.reason), "; torch.compile recomputed 39 op(s) in 4 of 4 checkpoint region(s) and saved 3 "
                                     "activation tensor(s) / 196608 bytes for backward, compiled baseline 24 / "
                                     "2629632 (activation_memory_budget 1, CSE on)"));
    assert_null(strstr(text_str(&r.reason), "finding"));
}

static void partly_dropped_recompute_that_saves_is_a_finding(void **state)
{
    (void)state;
    struct fixture f;
    setup(&f, 4, 3, 30, 9, 800000);
    struct impl_result r = judge(&f);
    assert_int_equal(r.verdict, V_PASS);
    assert_non_null(strstr(text_str(&r.reason), "[finding: the recompute of 1 of 4 checkpoint region(s) was dropped by "
                                     "torch.compile's partitioner]"));
}

static void compiled_run_without_checkpoint_regions_keeps_its_verdict(void **state)
{
    (void)state;
    struct fixture f;
    setup(&f, 0, 0, 0, 24, 2629632);
    run_record_set_attr(&f.runs[1], "compile.regions", 4);
    run_record_set_attr(&f.runs[1], "compile.graph_breaks", 3);
    struct impl_result r = judge(&f);
    assert_int_equal(r.verdict, V_PASS);
    assert_non_null(strstr(text_str(&r.reason), "torch.compile: no checkpoint region in its 4 graph(s); 24 activation "
                                     "tensor(s) / 2629632 bytes saved for backward (activation_memory_budget 1, CSE "
                                     "on, 3 graph break(s))"));
}

static void without_a_compiled_baseline_only_a_dropped_recompute_is_judged(void **state)
{
    (void)state;
    struct fixture f;
    setup(&f, 4, 4, 39, 30, 9e9);
    run_record_free(&f.runs[0]);
    make_run(&f.runs[0], "compiled_baseline_0"); /* an eager baseline's kind of run: no compile.* */
    struct impl_result r = judge(&f);
    assert_int_equal(r.verdict, V_PASS);
    assert_non_null(strstr(text_str(&r.reason), "torch.compile recomputed 39 op(s) in 4 of 4 checkpoint region(s)"));
}

static void must_save_op_recomputed_is_memfail_naming_the_policy(void **state)
{
    (void)state;
    struct fixture f;
    setup(&f, 4, 4, 43, 3, 196608);
    run_record_set_attr(&f.runs[1], "compile.policy_must_save_ops", 8);
    run_record_set_attr(&f.runs[1], "compile.policy_must_save_recomputed", 8);
    struct impl_result r = judge(&f);
    assert_int_equal(r.verdict, V_MEMFAIL);
    assert_non_null(strstr(text_str(&r.reason), "gradients right, but torch.compile's partitioner does not hold the "
                                     "checkpoint's policy: it recomputes 8 of the 8 op(s) the policy marks "
                                     "MUST_SAVE"));
}

static void policy_held_keeps_the_verdict(void **state)
{
    (void)state;
    struct fixture f;
    setup(&f, 4, 4, 35, 8, 1310720);
    run_record_set_attr(&f.runs[1], "compile.policy_must_save_ops", 8);
    run_record_set_attr(&f.runs[1], "compile.policy_must_save_recomputed", 0);
    struct impl_result r = judge(&f);
    assert_int_equal(r.verdict, V_PASS);
    assert_non_null(strstr(text_str(&r.reason), "torch.compile recomputed 35 op(s) in 4 of 4 checkpoint region(s)"));
}

static void hooks_agreeing_with_the_graphs_add_nothing(void **state)
{
    (void)state;
    struct fixture f;
    setup(&f, 4, 4, 40, 3, 196608);
    run_record_set_attr(&f.runs[1], "compile.saved_tensors", 26);
    run_record_set_attr(&f.runs[1], "compile.saved_bytes", 858368);
    run_record_set_attr(&f.runs[1], "compile.hooked_saved_tensors", 26);
    run_record_set_attr(&f.runs[1], "compile.hooked_saved_bytes", 858368);
    struct impl_result r = judge(&f);
    assert_int_equal(r.verdict, V_PASS);
    assert_null(strstr(text_str(&r.reason), "saved_tensors_hooks"));
}

static void hooks_seeing_fewer_bytes_than_the_graphs_are_a_finding(void **state)
{
    (void)state;
    struct fixture f;
    setup(&f, 0, 0, 0, 24, 2433024);
    run_record_set_attr(&f.runs[1], "compile.saved_tensors", 42);
    run_record_set_attr(&f.runs[1], "compile.saved_bytes", 3090432);
    run_record_set_attr(&f.runs[1], "compile.hooked_saved_tensors", 2);
    run_record_set_attr(&f.runs[1], "compile.hooked_saved_bytes", 131072);
    struct impl_result r = judge(&f);
    assert_int_equal(r.verdict, V_PASS);
    assert_non_null(strstr(text_str(&r.reason), "[finding: saved_tensors_hooks saw 2 tensor(s) / 131072 bytes packed, the "
                                     "graphs save 42 / 3090432: hooks around the compiled code (a checkpoint) hold "
                                     "them]"));
}

static void measured_end_of_forward_bytes_go_beside_the_evidence(void **state)
{
    (void)state;
    struct fixture f;
    setup(&f, 4, 0, 0, 26, 2760704);
    run_record_set_attr(&f.runs[0], "memory.end_forward_bytes", 2695168);
    run_record_set_attr(&f.runs[1], "memory.end_forward_bytes", 2695168);
    struct impl_result r = judge(&f);
    assert_int_equal(r.verdict, V_MEMFAIL);
    assert_non_null(strstr(text_str(&r.reason), "dropped by the partitioner (activation_memory_budget 1, CSE on); end of "
                                     "forward held 2695168 bytes (meter), compiled_baseline_0 2695168"));
}

static void run_without_compile_evidence_is_judged_as_before(void **state)
{
    (void)state;
    struct fixture f;
    memset(&f, 0, sizeof f);
    case_defaults(&f.c);
    make_run(&f.runs[0], "compiled_baseline_0");
    set_evidence(&f.runs[0], 0, 0, 0, 24, 2629632);
    make_run(&f.runs[1], "mine");
    struct impl_result r = judge(&f);
    assert_int_equal(r.verdict, V_PASS);
    assert_null(strstr(text_str(&r.reason), "torch.compile"));
}

static void a_failing_run_stays_fail_whatever_the_partitioner_did(void **state)
{
    (void)state;
    struct fixture f;
    setup(&f, 4, 0, 0, 24, 2629632);
    struct run_tensor *w = (struct run_tensor *)run_record_find(&f.runs[1], "steps/1/grads/w");
    assert_non_null(w);
    ((float *)w->t.data)[2] = 3.5f;
    struct impl_result r = judge(&f);
    assert_int_equal(r.verdict, V_FAIL);
}

static void preserve_rng_state_false_inside_compiled_code_is_said_harmless(void **state)
{
    (void)state;
    struct fixture f;
    setup(&f, 4, 4, 39, 3, 196608);
    run_record_set_attr(&f.runs[1], "compile.ckpt_regions_without_rng_state", 2);
    struct impl_result r = judge(&f);
    assert_int_equal(r.verdict, V_PASS);
    assert_non_null(strstr(text_str(&r.reason), " [preserve_rng_state=False in 2 checkpoint region(s) that draw random numbers, "
                                     "inside compiled code: harmless, the partitioner saves each random op's output "
                                     "or recomputes it from the seed it saved"));
}

static void preserve_rng_state_false_is_not_called_harmless_on_a_fail(void **state)
{
    (void)state;
    struct fixture f;
    setup(&f, 4, 4, 39, 3, 196608);
    run_record_set_attr(&f.runs[1], "compile.ckpt_regions_without_rng_state", 2);
    struct run_tensor *w = (struct run_tensor *)run_record_find(&f.runs[1], "steps/1/grads/w");
    ((float *)w->t.data)[2] = 3.5f;
    struct impl_result r = judge(&f);
    assert_int_equal(r.verdict, V_FAIL);
    assert_null(strstr(text_str(&r.reason), "harmless"));
}

/* "mine" ran Inductor's kernels (codegen 1) and FAILs against a baseline
 * with no compile evidence (the eager baseline_0's kind of run). */
static struct impl_result compiled_fail_against(int base_codegen)
{
    struct fixture f;
    setup(&f, 4, 4, 39, 3, 196608);
    run_record_free(&f.runs[0]);
    make_run(&f.runs[0], "compiled_baseline_0");
    if (base_codegen >= 0)
        run_record_set_attr(&f.runs[0], "compile.codegen", base_codegen);
    run_record_set_attr(&f.runs[1], "compile.codegen", 1);
    struct run_tensor *w = (struct run_tensor *)run_record_find(&f.runs[1], "steps/1/grads/w");
    ((float *)w->t.data)[2] += 3.0f / 4194304.0f; /* one ULP */
    return judge(&f);
}

static void compiled_run_failing_against_the_eager_baseline_says_what_to_pass(void **state)
{
    (void)state;
    struct impl_result r = compiled_fail_against(-1);
    assert_int_equal(r.verdict, V_FAIL);
    assert_non_null(strstr(text_str(&r.reason), " [compiled, and judged against the eager baseline only: the compiler's rounding "
                                     "cannot be told apart from the checkpoint here; pass baselines={\"compiled\": "
                                     "Run(prepare=<the plain model compiled the same way>)} and Run(..., "
                                     "against=\"compiled\")"));
}

static void compiled_run_failing_against_its_compiled_family_says_nothing_of_it(void **state)
{
    (void)state;
    struct impl_result r = compiled_fail_against(1);
    assert_int_equal(r.verdict, V_FAIL);
    assert_null(strstr(text_str(&r.reason), "judged against the eager baseline only"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(recompute_dropped_by_the_partitioner_is_memfail_naming_torch_compile),
        cmocka_unit_test(recompute_dropped_is_memfail_even_when_fewer_bytes_are_saved),
        cmocka_unit_test(saved_bytes_no_fewer_than_the_compiled_baseline_is_memfail),
        cmocka_unit_test(kept_recompute_that_saves_passes_with_its_figures),
        cmocka_unit_test(partly_dropped_recompute_that_saves_is_a_finding),
        cmocka_unit_test(compiled_run_without_checkpoint_regions_keeps_its_verdict),
        cmocka_unit_test(without_a_compiled_baseline_only_a_dropped_recompute_is_judged),
        cmocka_unit_test(must_save_op_recomputed_is_memfail_naming_the_policy),
        cmocka_unit_test(policy_held_keeps_the_verdict),
        cmocka_unit_test(hooks_agreeing_with_the_graphs_add_nothing),
        cmocka_unit_test(hooks_seeing_fewer_bytes_than_the_graphs_are_a_finding),
        cmocka_unit_test(measured_end_of_forward_bytes_go_beside_the_evidence),
        cmocka_unit_test(run_without_compile_evidence_is_judged_as_before),
        cmocka_unit_test(a_failing_run_stays_fail_whatever_the_partitioner_did),
        cmocka_unit_test(preserve_rng_state_false_inside_compiled_code_is_said_harmless),
        cmocka_unit_test(preserve_rng_state_false_is_not_called_harmless_on_a_fail),
        cmocka_unit_test(compiled_run_failing_against_the_eager_baseline_says_what_to_pass),
        cmocka_unit_test(compiled_run_failing_against_its_compiled_family_says_nothing_of_it),
    };
    return cmocka_run_group_tests(tests, NULL, free_kept_results);
}
