/* A user's run against the memory statement drawn from its baseline's
 * memory map (user_memory.h): each finding on its own and in each
 * direction, from records alone. */
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

#define BASE_HELD 1000000.0 /* margin: 5% of it, 50000 B */

struct pair {
    struct run_record base, run;
    char why[512], where[512];
};

/* baseline_0 holding BASE_HELD; "mine" holding `held`, stated `stated`,
 * having recomputed `ops` ops. */
static void setup_pair(struct pair *p, double held, double stated, double ops)
{
    run_record_init(&p->base, "baseline_0");
    run_record_init(&p->run, "mine");
    run_record_set_attr(&p->base, "memory.end_forward_bytes", BASE_HELD);
    run_record_set_attr(&p->run, "memory.end_forward_bytes", held);
    run_record_set_attr(&p->run, "memory.stated_end_forward_bytes", stated);
    run_record_set_attr(&p->run, "memory.recomputed_ops", ops);
    run_record_set_attr(&p->run, "memory.kept_after_backward_bytes", 0);
}

static enum user_memory_outcome check(struct pair *p)
{
    return user_memory_check(&p->base, &p->run, p->why, sizeof p->why, p->where, sizeof p->where);
}

static void teardown_pair(struct pair *p)
{
    run_record_free(&p->base);
    run_record_free(&p->run);
}

static void a_run_holding_what_is_stated_passes(void **state)
{
    (void)state;
    struct pair p;
    setup_pair(&p, 100000, 100000, 52);
    assert_int_equal(check(&p), USER_MEMORY_OK);
    assert_non_null(strstr(p.why, "holds 100000 B at the end of forward, stated 100000 B"));
    teardown_pair(&p);
}

static void a_statement_below_zero_is_not_judged_and_says_the_baseline_read_short(void **state)
{
    (void)state;
    struct pair p; /* baseline read 15364 B where its map held 32768 B of recomputed activations */
    setup_pair(&p, 59268, -7292, 4);
    assert_int_equal(check(&p), USER_MEMORY_UNJUDGED);
    assert_non_null(strstr(p.why, "held bytes not judged"));
    assert_non_null(strstr(p.why, "below zero"));
    teardown_pair(&p);
}

static void a_run_holding_fewer_bytes_than_stated_passes(void **state)
{
    (void)state;
    struct pair p; /* the statement is an upper bound: no RNG stash, say */
    setup_pair(&p, 80000, 100000, 52);
    assert_int_equal(check(&p), USER_MEMORY_OK);
    teardown_pair(&p);
}

static void a_run_holding_more_than_stated_within_the_margin_passes(void **state)
{
    (void)state;
    struct pair p; /* a bounded staging buffer */
    setup_pair(&p, 100000 + 49999, 100000, 52);
    assert_int_equal(check(&p), USER_MEMORY_OK);
    teardown_pair(&p);
}

static void a_run_holding_more_than_stated_beyond_the_margin_fails_naming_what_it_holds(void **state)
{
    (void)state;
    struct pair p;
    setup_pair(&p, 900000, 100000, 52);
    snprintf(p.run.memory_still_held, sizeof p.run.memory_still_held,
             "1 tensor(s), 262144 B: blocks.0.fc1 aten.addmm#0 (262144 B)");
    snprintf(p.run.memory_statement, sizeof p.run.memory_statement, "baseline_0 holds 1000000 B ...");
    assert_int_equal(check(&p), USER_MEMORY_FAIL);
    assert_non_null(strstr(p.why, "holds 900000 B at the end of forward, 800000 B more than the 100000 B its "
                                  "statement allows (margin 50000 B, 5% of baseline_0's); still held: 1 tensor(s), "
                                  "262144 B: blocks.0.fc1 aten.addmm#0"));
    assert_non_null(strstr(p.where, "/runs/mine/memory.end_forward_bytes = 900000 > stated 100000"));
    teardown_pair(&p);
}

static void a_run_that_recomputes_nothing_and_holds_its_baselines_bytes_is_not_a_checkpoint(void **state)
{
    (void)state;
    struct pair p; /* its statement is the baseline's: only the recompute count tells */
    setup_pair(&p, BASE_HELD, BASE_HELD, 0);
    assert_int_equal(check(&p), USER_MEMORY_FAIL);
    assert_non_null(strstr(p.why, "recomputes nothing: not a checkpoint"));
    assert_non_null(strstr(p.where, "/runs/mine/memory.recomputed_ops = 0"));
    teardown_pair(&p);
}

static void a_run_that_recomputes_nothing_but_holds_less_is_judged_by_its_statement(void **state)
{
    (void)state;
    struct pair p; /* an offload: nothing recomputed, bytes moved away */
    setup_pair(&p, 200000, BASE_HELD, 0);
    assert_int_equal(check(&p), USER_MEMORY_OK);
    teardown_pair(&p);
}

static void a_plain_control_run_is_not_judged(void **state)
{
    (void)state;
    struct pair p;
    setup_pair(&p, BASE_HELD, BASE_HELD, 0);
    run_record_set_attr(&p.run, "memory.control", 1);
    assert_int_equal(check(&p), USER_MEMORY_UNJUDGED);
    assert_non_null(strstr(p.why, "a plain control run"));
    teardown_pair(&p);
}

static void a_run_keeping_recomputed_activations_after_backward_fails_naming_them(void **state)
{
    (void)state;
    struct pair p;
    setup_pair(&p, 100000, 100000, 52);
    run_record_set_attr(&p.run, "memory.kept_after_backward_bytes", 524288);
    snprintf(p.run.memory_kept, sizeof p.run.memory_kept, "2 tensor(s), 524288 B: blocks.3 aten.gelu#0 (262144 B)");
    assert_int_equal(check(&p), USER_MEMORY_FAIL);
    assert_non_null(strstr(p.why, "keeps 524288 B of the activations it recomputed alive after backward, until "
                                  "the next step (margin 50000 B): 2 tensor(s), 524288 B: blocks.3 aten.gelu#0"));
    teardown_pair(&p);
}

static void a_run_keeping_less_than_the_margin_after_backward_passes(void **state)
{
    (void)state;
    struct pair p;
    setup_pair(&p, 100000, 100000, 52);
    run_record_set_attr(&p.run, "memory.kept_after_backward_bytes", 4096);
    assert_int_equal(check(&p), USER_MEMORY_OK);
    teardown_pair(&p);
}

static void a_run_without_a_statement_is_left_to_the_other_checks(void **state)
{
    (void)state;
    struct pair p;
    run_record_init(&p.base, "baseline_0");
    run_record_init(&p.run, "mine");
    run_record_set_attr(&p.run, "memory.end_forward_bytes", 5);
    assert_int_equal(check(&p), USER_MEMORY_UNJUDGED);
    assert_string_equal(p.why, "");
    teardown_pair(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_run_holding_what_is_stated_passes),
        cmocka_unit_test(a_statement_below_zero_is_not_judged_and_says_the_baseline_read_short),
        cmocka_unit_test(a_run_holding_fewer_bytes_than_stated_passes),
        cmocka_unit_test(a_run_holding_more_than_stated_within_the_margin_passes),
        cmocka_unit_test(a_run_holding_more_than_stated_beyond_the_margin_fails_naming_what_it_holds),
        cmocka_unit_test(a_run_that_recomputes_nothing_and_holds_its_baselines_bytes_is_not_a_checkpoint),
        cmocka_unit_test(a_run_that_recomputes_nothing_but_holds_less_is_judged_by_its_statement),
        cmocka_unit_test(a_plain_control_run_is_not_judged),
        cmocka_unit_test(a_run_keeping_recomputed_activations_after_backward_fails_naming_them),
        cmocka_unit_test(a_run_keeping_less_than_the_margin_after_backward_passes),
        cmocka_unit_test(a_run_without_a_statement_is_left_to_the_other_checks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
