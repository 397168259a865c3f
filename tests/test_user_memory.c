/* A user's run against the memory findings drawn, step by step, from its
 * baseline's memory map (user_memory.h): each finding on its own and in
 * each direction, the absolute floor, from records alone. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "run_record.h"
#include "user_memory.h"

#define BASE_HELD 1000000.0
#define FLOOR USER_MEMORY_FLOOR_BYTES

struct pair {
    struct run_record base, run;
    struct text why, where;
};

/* baseline_0 holding BASE_HELD; "mine" holding `held` on its judged step
 * (step 2 of 3), stated `stated`, having recomputed `ops` ops, saving at
 * most BASE_HELD - held on any step. */
static void setup_pair(struct pair *p, double held, double stated, double ops)
{
    memset(&p->why, 0, sizeof p->why);
    memset(&p->where, 0, sizeof p->where);
    run_record_init(&p->base, "baseline_0");
    run_record_init(&p->run, "mine");
    run_record_set_attr(&p->base, "memory.end_forward_bytes", BASE_HELD);
    run_record_set_attr(&p->run, "memory.end_forward_bytes", held);
    run_record_set_attr(&p->run, "memory.judged_held_bytes", held);
    run_record_set_attr(&p->run, "memory.judged_baseline_held_bytes", BASE_HELD);
    run_record_set_attr(&p->run, "memory.stated_end_forward_bytes", stated);
    run_record_set_attr(&p->run, "memory.max_saving_bytes", BASE_HELD - held);
    run_record_set_attr(&p->run, "memory.recomputed_ops", ops);
    run_record_set_attr(&p->run, "memory.judged_step", 2);
    run_record_set_attr(&p->run, "memory.steps_judged", 3);
    run_record_set_attr(&p->run, "memory.extra_bytes", 0);
    run_record_set_attr(&p->run, "memory.kept_after_backward_bytes", 0);
}

static enum user_memory_outcome check(struct pair *p)
{
    return user_memory_check(&p->base, &p->run, &p->why, &p->where);
}

static void teardown_pair(struct pair *p)
{
    run_record_free(&p->base);
    run_record_free(&p->run);
    text_free(&p->why);
    text_free(&p->where);
}

static void a_run_holding_what_is_stated_passes(void **state)
{
    (void)state;
    struct pair p = {0};
    setup_pair(&p, 100000, 100000, 52);
    assert_int_equal(check(&p), USER_MEMORY_OK);
    assert_non_null(
        strstr(text_str(&p.why), "holds 100000 B at the end of forward on step 2 of 3, stated 100000 B (floor 8192 B)"));
    assert_null(strstr(text_str(&p.why), "above its statement"));
    teardown_pair(&p);
}

static void a_statement_below_zero_is_not_judged_and_says_the_baseline_read_short(void **state)
{
    (void)state;
    struct pair p = {0}; /* baseline read 15364 B where its map held 32768 B of recomputed activations */
    setup_pair(&p, 59268, -7292, 4);
    assert_int_equal(check(&p), USER_MEMORY_UNJUDGED);
    assert_non_null(strstr(text_str(&p.why), "memory not judged"));
    assert_non_null(strstr(text_str(&p.why), "below zero"));
    teardown_pair(&p);
}

static void a_run_holding_fewer_bytes_than_stated_passes(void **state)
{
    (void)state;
    struct pair p = {0}; /* the statement is an upper bound: no RNG stash, say */
    setup_pair(&p, 80000, 100000, 52);
    assert_int_equal(check(&p), USER_MEMORY_OK);
    teardown_pair(&p);
}

static void a_pass_holding_more_than_stated_within_the_floor_says_how_much_and_what(void **state)
{
    (void)state;
    struct pair p = {0};
    setup_pair(&p, 100000 + 4176, 100000, 52);
    text_setf(&p.run.memory_extra, "1 tensor(s), 4176 B: (model) aten.empty#0 (4176 B)");
    run_record_set_attr(&p.run, "memory.extra_bytes", 4176);
    assert_int_equal(check(&p), USER_MEMORY_OK);
    assert_non_null(strstr(text_str(&p.why), ", 4176 B above its statement: 1 tensor(s), 4176 B: (model) aten.empty#0"));
    teardown_pair(&p);
}

static void the_floor_is_absolute_bytes_never_a_fraction_of_the_baseline(void **state)
{
    (void)state;
    struct pair p = {0}; /* 0.005% of a 1 GB baseline, one byte past the floor */
    setup_pair(&p, 100000 + FLOOR + 1, 100000, 52);
    run_record_set_attr(&p.base, "memory.end_forward_bytes", 1e9);
    run_record_set_attr(&p.run, "memory.judged_baseline_held_bytes", 1e9);
    run_record_set_attr(&p.run, "memory.max_saving_bytes", 1e9 - 200000);
    text_setf(&p.run.memory_still_held, "2 tensor(s), 32768 B: blocks.0.attn aten._softmax#0 (16384 B, held by blocks.0.attn.last_probs)");
    text_setf(&p.run.memory_statement, "step 2: the baseline holds ...");
    assert_int_equal(check(&p), USER_MEMORY_FAIL);
    assert_non_null(strstr(text_str(&p.why), "step 2: holds 108193 B at the end of forward, 8193 B more than the 100000 B its "
                                  "statement allows (floor 8192 B); still held: 2 tensor(s), 32768 B: blocks.0.attn "
                                  "aten._softmax#0 (16384 B, held by blocks.0.attn.last_probs)"));
    assert_non_null(strstr(text_str(&p.where), "/runs/mine/memory.judged_held_bytes = 108193 > stated 100000"));
    teardown_pair(&p);
}

static void the_floor_a_run_records_is_the_one_it_is_held_to(void **state)
{
    (void)state;
    struct pair p = {0}; /* on CUDA the producer adds the caching allocator's rounding to the floor */
    setup_pair(&p, 100000 + 50000, 100000, 52);
    run_record_set_attr(&p.run, "memory.floor_bytes", 60000);
    assert_int_equal(check(&p), USER_MEMORY_OK);
    run_record_set_attr(&p.run, "memory.floor_bytes", 40000);
    assert_int_equal(check(&p), USER_MEMORY_FAIL);
    teardown_pair(&p);
}

static void a_run_that_saves_nothing_is_memfail_whatever_it_re_runs_naming_its_declared_saves(void **state)
{
    (void)state;
    struct pair p = {0}; /* a policy that saves every op: views re-run, nothing saved */
    setup_pair(&p, BASE_HELD + 282368, BASE_HELD + 282368, 99);
    text_setf(&p.run.memory_declared, "60 tensor(s), 1478656 B: blocks.0.fc1 aten.addmm#0 (131072 B)");
    assert_int_equal(check(&p), USER_MEMORY_FAIL);
    assert_non_null(strstr(text_str(&p.why), "saves nothing: on none of its 3 step(s) does it hold at the end of forward more "
                                  "than the 8192 B floor less than baseline_0 (at most -282368 B less), though its "
                                  "backward re-ran 99 op(s)"));
    assert_non_null(strstr(text_str(&p.why), "its policy declares saved 60 tensor(s), 1478656 B: blocks.0.fc1 aten.addmm#0"));
    assert_non_null(strstr(text_str(&p.where), "/runs/mine/memory.max_saving_bytes = -282368 <= floor 8192"));
    teardown_pair(&p);
}

static void a_model_too_small_for_any_saving_to_show_above_the_floor_says_so_and_passes(void **state)
{
    (void)state;
    struct pair p = {0}; /* a 640 B baseline: the RNG stash alone outweighs every activation */
    setup_pair(&p, 5440, 5696, 14);
    run_record_set_attr(&p.base, "memory.end_forward_bytes", 640);
    run_record_set_attr(&p.run, "memory.judged_baseline_held_bytes", 640);
    run_record_set_attr(&p.run, "memory.max_baseline_held_bytes", 640);
    run_record_set_attr(&p.run, "memory.max_saving_bytes", -4800);
    assert_int_equal(check(&p), USER_MEMORY_OK);
    assert_non_null(strstr(text_str(&p.why), "too small to tell by bytes whether it saves anything (its baseline holds at "
                                  "most 640 B, at most 2 times the floor)"));
    run_record_set_attr(&p.run, "memory.max_baseline_held_bytes", 2 * FLOOR + 1);
    assert_int_equal(check(&p), USER_MEMORY_FAIL);
    teardown_pair(&p);
}

static void a_run_that_saves_on_one_step_only_is_a_checkpoint(void **state)
{
    (void)state;
    struct pair p = {0}; /* checkpoints long sequences only: its judged step holds what the baseline does */
    setup_pair(&p, BASE_HELD, BASE_HELD, 55);
    run_record_set_attr(&p.run, "memory.max_saving_bytes", 700000);
    assert_int_equal(check(&p), USER_MEMORY_OK);
    teardown_pair(&p);
}

static void a_run_that_holds_measurably_less_without_visible_recompute_is_no_memfail(void **state)
{
    (void)state;
    struct pair p = {0}; /* a fused op that recomputes its dropout mask in its own backward */
    setup_pair(&p, BASE_HELD - 12544, BASE_HELD, 0);
    assert_int_equal(check(&p), USER_MEMORY_OK);
    teardown_pair(&p);
}

static void extras_beyond_the_floor_are_memfail_naming_each_tensor_and_the_step(void **state)
{
    (void)state;
    struct pair p = {0};
    setup_pair(&p, 100000 + 524288, 100000, 183); /* the extras on top of the statement */
    run_record_set_attr(&p.run, "memory.extra_bytes", 524288);
    text_setf(&p.run.memory_extra, "4 tensor(s), 524288 B: blocks.0 aten.clone#0 (131072 B, held by blocks.0.fc1.kept)");
    assert_int_equal(check(&p), USER_MEMORY_FAIL);
    assert_non_null(strstr(text_str(&p.why), "step 2: holds 524288 B at the end of forward in tensors born in its forward that "
                                  "baseline_0 does not hold and nothing declares (floor 8192 B): 4 tensor(s), 524288 "
                                  "B: blocks.0 aten.clone#0 (131072 B, held by blocks.0.fc1.kept)"));
    assert_non_null(strstr(text_str(&p.where), "/runs/mine/memory.extra_bytes = 524288 (step 2)"));
    teardown_pair(&p);
}

static void copies_that_stand_in_for_what_the_statement_counts_pass_naming_them(void **state)
{
    /* DeepSpeed's partition_activations on one rank: a copy of each
     * region's input kept in place of the input, so the run holds its
     * statement (within the floor) though the copies are born in forward. */
    (void)state;
    struct pair p = {0};
    setup_pair(&p, 100000 + 4176, 100000, 183);
    run_record_set_attr(&p.run, "memory.extra_bytes", 16496);
    text_setf(&p.run.memory_extra, "12 tensor(s), 16496 B: (model) aten.clone#0 (4096 B)");
    assert_int_equal(check(&p), USER_MEMORY_OK);
    assert_non_null(strstr(text_str(&p.why), "4176 B above its statement: 12 tensor(s), 16496 B: (model) aten.clone#0 (4096 B)"));
    teardown_pair(&p);
}

static void extras_within_the_floor_pass(void **state)
{
    (void)state;
    struct pair p = {0};
    setup_pair(&p, 100000, 100000, 52);
    run_record_set_attr(&p.run, "memory.extra_bytes", FLOOR);
    assert_int_equal(check(&p), USER_MEMORY_OK);
    teardown_pair(&p);
}

static void a_plain_control_run_is_not_judged(void **state)
{
    (void)state;
    struct pair p = {0};
    setup_pair(&p, BASE_HELD, BASE_HELD, 0);
    run_record_set_attr(&p.run, "memory.control", 1);
    assert_int_equal(check(&p), USER_MEMORY_UNJUDGED);
    assert_non_null(strstr(text_str(&p.why), "a plain control run"));
    teardown_pair(&p);
}

static void a_run_keeping_tensors_of_a_step_into_the_next_fails_naming_them(void **state)
{
    (void)state;
    struct pair p = {0};
    setup_pair(&p, 100000, 100000, 52);
    run_record_set_attr(&p.run, "memory.kept_after_backward_bytes", 131072);
    text_setf(&p.run.memory_kept, "4 tensor(s), 131072 B: (model) aten.clone#0 made in backward (32768 B, held by "
             "blocks.3.last_recomputed)");
    assert_int_equal(check(&p), USER_MEMORY_FAIL);
    assert_non_null(strstr(text_str(&p.why), "step 2: keeps 131072 B born in that step alive after backward, into the next step "
                                  "(floor 8192 B): 4 tensor(s), 131072 B: (model) aten.clone#0 made in backward"));
    teardown_pair(&p);
}

static void a_run_keeping_less_than_the_floor_after_backward_passes(void **state)
{
    (void)state;
    struct pair p = {0};
    setup_pair(&p, 100000, 100000, 52);
    run_record_set_attr(&p.run, "memory.kept_after_backward_bytes", 4096);
    assert_int_equal(check(&p), USER_MEMORY_OK);
    teardown_pair(&p);
}

static void a_run_without_a_statement_is_left_to_the_other_checks(void **state)
{
    (void)state;
    struct pair p = {0};
    run_record_init(&p.base, "baseline_0");
    run_record_init(&p.run, "mine");
    run_record_set_attr(&p.run, "memory.end_forward_bytes", 5);
    assert_int_equal(check(&p), USER_MEMORY_UNJUDGED);
    assert_string_equal(text_str(&p.why), "");
    teardown_pair(&p);
}

static void a_run_its_producer_could_not_judge_says_why(void **state)
{
    (void)state;
    struct pair p = {0};
    run_record_init(&p.base, "baseline_0");
    run_record_init(&p.run, "mine");
    text_setf(&p.run.memory_statement, "not judged: CPU memory not recorded: no usable libckpt_aten.so");
    assert_int_equal(check(&p), USER_MEMORY_UNJUDGED);
    assert_string_equal(text_str(&p.why), "memory not judged: CPU memory not recorded: no usable libckpt_aten.so");
    teardown_pair(&p);
}

static void a_report_written_before_the_per_step_findings_is_judged_on_step_1(void **state)
{
    (void)state;
    struct pair p = {0}; /* only the older attributes */
    run_record_init(&p.base, "baseline_0");
    run_record_init(&p.run, "mine");
    run_record_set_attr(&p.base, "memory.end_forward_bytes", BASE_HELD);
    run_record_set_attr(&p.run, "memory.end_forward_bytes", BASE_HELD);
    run_record_set_attr(&p.run, "memory.stated_end_forward_bytes", 100000);
    run_record_set_attr(&p.run, "memory.recomputed_ops", 0);
    assert_int_equal(check(&p), USER_MEMORY_FAIL);
    assert_non_null(strstr(text_str(&p.why), "saves nothing: on none of its 1 step(s)"));
    teardown_pair(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_run_holding_what_is_stated_passes),
        cmocka_unit_test(a_statement_below_zero_is_not_judged_and_says_the_baseline_read_short),
        cmocka_unit_test(a_run_holding_fewer_bytes_than_stated_passes),
        cmocka_unit_test(a_pass_holding_more_than_stated_within_the_floor_says_how_much_and_what),
        cmocka_unit_test(the_floor_is_absolute_bytes_never_a_fraction_of_the_baseline),
        cmocka_unit_test(the_floor_a_run_records_is_the_one_it_is_held_to),
        cmocka_unit_test(a_run_that_saves_nothing_is_memfail_whatever_it_re_runs_naming_its_declared_saves),
        cmocka_unit_test(a_model_too_small_for_any_saving_to_show_above_the_floor_says_so_and_passes),
        cmocka_unit_test(a_run_that_saves_on_one_step_only_is_a_checkpoint),
        cmocka_unit_test(a_run_that_holds_measurably_less_without_visible_recompute_is_no_memfail),
        cmocka_unit_test(extras_beyond_the_floor_are_memfail_naming_each_tensor_and_the_step),
        cmocka_unit_test(copies_that_stand_in_for_what_the_statement_counts_pass_naming_them),
        cmocka_unit_test(extras_within_the_floor_pass),
        cmocka_unit_test(a_plain_control_run_is_not_judged),
        cmocka_unit_test(a_run_keeping_tensors_of_a_step_into_the_next_fails_naming_them),
        cmocka_unit_test(a_run_keeping_less_than_the_floor_after_backward_passes),
        cmocka_unit_test(a_run_without_a_statement_is_left_to_the_other_checks),
        cmocka_unit_test(a_run_its_producer_could_not_judge_says_why),
        cmocka_unit_test(a_report_written_before_the_per_step_findings_is_judged_on_step_1),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
