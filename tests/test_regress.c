/* Unit tests for regress: each test compares two hand-built summaries and
 * pins one rule of what counts as a regression. */
#include <jansson.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "error.h"
#include "regress.h"

static json_t *rec(const char *c, const char *impl, const char *verdict, int expected)
{
    return json_pack("{s:s, s:s, s:s, s:b, s:f, s:i, s:f, s:f, s:i}", "case", c, "impl", impl, "verdict", verdict,
                     "expected", expected, "max_scaled_ulp", 0.0, "raw_max_ulp", 0, "memory_saved", 0.30, "overhead",
                     1.5, "raw_noise_floor_ulp", 0);
}

static json_t *summary(void) { return json_pack("{s:s, s:s, s:[]}", "git_rev", "r1", "created_utc", "t", "records"); }

static void add(json_t *s, json_t *r) { json_array_append_new(json_object_get(s, "records"), r); }

struct outcome {
    struct regress_counts n;
    char *text;
};

/* Compares and frees both summaries (list_removed: a line per removed record). */
static struct outcome run_listing(json_t *prev, json_t *cur, int list_removed)
{
    struct outcome o = {{0}, NULL};
    size_t len = 0;
    FILE *mem = open_memstream(&o.text, &len);
    assert_non_null(mem);
    struct regress_options opt;
    regress_default_options(&opt);
    opt.list_removed = list_removed;
    assert_int_equal(regress_compare(prev, cur, "PREV", &opt, mem, &o.n, NULL), ST_OK);
    fclose(mem);
    json_decref(prev);
    json_decref(cur);
    return o;
}

static struct outcome run(json_t *prev, json_t *cur) { return run_listing(prev, cur, 0); }

/* One case × impl in each run, built by the caller from rec(). */
static struct outcome pair(json_t *p, json_t *c)
{
    json_t *prev = summary(), *cur = summary();
    add(prev, p);
    add(cur, c);
    return run(prev, cur);
}

static void identical_runs_have_no_findings(void **state)
{
    (void)state;
    struct outcome o = pair(rec("a", "reentrant", "PASS", 1), rec("a", "reentrant", "PASS", 1));
    assert_int_equal(o.n.regressions, 0);
    assert_int_equal(o.n.common, 1);
    assert_non_null(strstr(o.text, "0 regression(s) against PREV; 1 record(s) in both, 0 new, 0 removed"));
    free(o.text);
}

static void worse_verdict_is_a_regression(void **state)
{
    (void)state;
    struct outcome o = pair(rec("a", "reentrant", "PASS", 1), rec("a", "reentrant", "FAIL", 1));
    assert_int_equal(o.n.regressions, 1);
    assert_non_null(strstr(o.text, "  REGRESSION  a/reentrant: verdict PASS -> FAIL\n"));
    free(o.text);
}

static void memfail_to_error_is_a_regression(void **state)
{
    (void)state;
    struct outcome o = pair(rec("a", "x", "MEMFAIL", 1), rec("a", "x", "ERROR", 1));
    assert_int_equal(o.n.regressions, 1);
    free(o.text);
}

static void better_verdict_is_an_improvement(void **state)
{
    (void)state;
    struct outcome o = pair(rec("a", "reentrant", "FAIL", 0), rec("a", "reentrant", "PASS", 1));
    assert_int_equal(o.n.regressions, 0);
    assert_int_equal(o.n.improvements, 1);
    assert_non_null(strstr(o.text, "improved    a/reentrant: verdict FAIL -> PASS; now the verdict the case expects"));
    free(o.text);
}

static void planted_bug_no_longer_caught_is_a_regression(void **state)
{
    (void)state;
    /* FAIL -> PASS is better by the order but the case expected FAIL. */
    struct outcome o = pair(rec("a", "stale_input", "FAIL", 1), rec("a", "stale_input", "PASS", 0));
    assert_int_equal(o.n.regressions, 1);
    assert_non_null(strstr(o.text, "REGRESSION  a/stale_input: verdict FAIL -> PASS; no longer the verdict"));
    free(o.text);
}

static void pass_to_noise_where_the_baseline_was_noisy_is_noise(void **state)
{
    (void)state;
    json_t *p = rec("a", "reentrant", "PASS", 1);
    json_object_set_new(p, "raw_noise_floor_ulp", json_integer(8));
    struct outcome o = pair(p, rec("a", "reentrant", "NOISE", 1));
    assert_int_equal(o.n.regressions, 0);
    assert_int_equal(o.n.noise, 1);
    free(o.text);
}

/* A summary written before the raw distances were named raw (the previous
 * nightly's) is read by its own names. */
static void an_older_summarys_noise_floor_is_read(void **state)
{
    (void)state;
    json_t *p = rec("a", "reentrant", "PASS", 1);
    json_object_del(p, "raw_noise_floor_ulp");
    json_object_set_new(p, "noise_floor_ulp", json_integer(8));
    struct outcome o = pair(p, rec("a", "reentrant", "NOISE", 1));
    assert_int_equal(o.n.regressions, 0);
    assert_int_equal(o.n.noise, 1);
    free(o.text);
}

static void pass_to_noise_of_a_deterministic_case_is_a_regression(void **state)
{
    (void)state;
    struct outcome o = pair(rec("a", "reentrant", "PASS", 1), rec("a", "reentrant", "NOISE", 1));
    assert_int_equal(o.n.regressions, 1);
    free(o.text);
}

/* The verdict's distance, max_scaled_ulp, is the one compared and named. */
static void grown_distance_is_a_regression(void **state)
{
    (void)state;
    json_t *c = rec("a", "reentrant", "PASS", 1);
    json_object_set_new(c, "max_scaled_ulp", json_real(0.75));
    struct outcome o = pair(rec("a", "reentrant", "PASS", 1), c);
    assert_int_equal(o.n.regressions, 1);
    assert_non_null(strstr(o.text, "scaled ULP 0 -> 0.75"));
    free(o.text);
}

/* The raw element-wise distance is not the verdict's: its growth alone is
 * no finding (a near-zero element's sign flip is 2^31 raw ULP). */
static void grown_raw_distance_alone_is_not_a_regression(void **state)
{
    (void)state;
    json_t *c = rec("a", "reentrant", "PASS", 1);
    json_object_set_new(c, "raw_max_ulp", json_integer(2000000000));
    struct outcome o = pair(rec("a", "reentrant", "PASS", 1), c);
    assert_int_equal(o.n.regressions, 0);
    free(o.text);
}

static void infinite_distance_is_larger_than_any(void **state)
{
    (void)state;
    /* PASS within a tolerance of ULPs, both times. */
    json_t *p = rec("a", "reentrant", "PASS", 1), *c = rec("a", "reentrant", "PASS", 1);
    json_object_set_new(p, "max_scaled_ulp", json_real(3e6));
    json_object_set_new(c, "max_scaled_ulp", json_null());
    struct outcome o = pair(p, c);
    assert_int_equal(o.n.regressions, 1);
    assert_non_null(strstr(o.text, "scaled ULP 3e+06 -> inf"));
    free(o.text);
}

static void each_regression_is_listed_for_summary_and_junit(void **state)
{
    (void)state;
    json_t *prev = summary(), *cur = summary(), *found = json_array();
    add(prev, rec("a", "reentrant", "PASS", 1));
    add(cur, rec("a", "reentrant", "FAIL", 0));
    add(prev, rec("b", "nonreentrant", "PASS", 1));
    add(cur, rec("b", "nonreentrant", "PASS", 1));
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    struct regress_options opt;
    regress_default_options(&opt);
    struct regress_counts n;
    assert_int_equal(regress_compare(prev, cur, "PREV", &opt, mem, &n, found), ST_OK);
    fclose(mem);
    assert_int_equal(n.regressions, 1);
    assert_int_equal(json_array_size(found), 1);
    const json_t *r = json_array_get(found, 0);
    assert_string_equal(json_string_value(json_object_get(r, "case")), "a");
    assert_string_equal(json_string_value(json_object_get(r, "impl")), "reentrant");
    assert_string_equal(json_string_value(json_object_get(r, "against")), "PREV");
    assert_non_null(strstr(json_string_value(json_object_get(r, "finding")), "verdict PASS -> FAIL"));
    free(text);
    json_decref(found);
    json_decref(prev);
    json_decref(cur);
}

/* An expected-FAIL planted bug over the atomic kernel: its distance wobbles
 * from night to night on one build (seen: noise_gpt_atomic/no_rng_stash). */
static void a_fail_whose_distance_wobbles_is_not_a_regression(void **state)
{
    (void)state;
    json_t *p = rec("noise_gpt_atomic", "no_rng_stash", "FAIL", 1), *c = rec("noise_gpt_atomic", "no_rng_stash", "FAIL", 1);
    json_object_set_new(p, "max_scaled_ulp", json_real(1.5e7));
    json_object_set_new(c, "max_scaled_ulp", json_real(1.6e7));
    struct outcome o = pair(p, c);
    assert_int_equal(o.n.regressions, 0);
    assert_null(strstr(o.text, "scaled ULP"));
    free(o.text);
}

static void grown_distance_within_noise_is_not_a_regression(void **state)
{
    (void)state;
    json_t *p = rec("a", "reentrant", "NOISE", 1), *c = rec("a", "reentrant", "NOISE", 1);
    json_object_set_new(p, "max_scaled_ulp", json_real(0.5));
    json_object_set_new(c, "max_scaled_ulp", json_real(6));
    struct outcome o = pair(p, c);
    assert_int_equal(o.n.regressions, 0);
    free(o.text);
}

static void memory_saved_shrinking_over_two_points_is_a_regression(void **state)
{
    (void)state;
    json_t *c = rec("a", "reentrant", "PASS", 1);
    json_object_set_new(c, "memory_saved", json_real(0.275));
    struct outcome o = pair(rec("a", "reentrant", "PASS", 1), c);
    assert_int_equal(o.n.regressions, 1);
    assert_non_null(strstr(o.text, "memory saved 30.0% -> 27.5% (-2.5 points)"));
    free(o.text);
}

static void the_held_cut_shrinking_over_two_points_is_a_regression(void **state)
{
    (void)state;
    json_t *p = rec("a", "mine", "PASS", 1), *c = rec("a", "mine", "PASS", 1);
    json_object_set_new(p, "held_cut", json_real(0.88));
    json_object_set_new(c, "held_cut", json_real(0.40));
    struct outcome o = pair(p, c);
    assert_int_equal(o.n.regressions, 1);
    assert_non_null(strstr(o.text, "held cut 88.0% -> 40.0% (-48.0 points)"));
    free(o.text);
}

/* A user's run, judged against its memory statement (both PASS). */
static json_t *stated(double held, double stated_bytes)
{
    json_t *r = rec("a", "mine", "PASS", 1);
    json_object_set_new(r, "memory", json_string("judged"));
    json_object_set_new(r, "judged_held_bytes", json_real(held));
    json_object_set_new(r, "stated_end_forward_bytes", json_real(stated_bytes));
    return r;
}

static void a_user_run_holding_more_above_its_statement_is_a_regression(void **state)
{
    (void)state;
    struct outcome o = pair(stated(347904, 347904), stated(347904 + 8193, 347904));
    assert_int_equal(o.n.regressions, 1);
    assert_non_null(strstr(o.text, "REGRESSION  a/mine: held above its memory statement +0 B -> +8193 B"));
    free(o.text);
}

static void a_statement_gap_moving_within_the_floor_is_not(void **state)
{
    (void)state;
    struct outcome o = pair(stated(347904, 347904), stated(347904 + 8192, 347904));
    assert_int_equal(o.n.regressions, 0);
    free(o.text);
}

static void memory_saved_shrinking_by_two_points_or_less_is_not(void **state)
{
    (void)state;
    json_t *c = rec("a", "reentrant", "PASS", 1);
    json_object_set_new(c, "memory_saved", json_real(0.285));
    struct outcome o = pair(rec("a", "reentrant", "PASS", 1), c);
    assert_int_equal(o.n.regressions, 0);
    free(o.text);
}

/* n cases of impl "r" whose overhead goes from 1.5 to 1.5 * factor[i]. */
static struct outcome overheads(int n, const double *factor)
{
    json_t *prev = summary(), *cur = summary();
    for (int i = 0; i < n; i++) {
        char name[16];
        snprintf(name, sizeof name, "c%d", i);
        add(prev, rec(name, "r", "PASS", 1));
        json_t *c = rec(name, "r", "PASS", 1);
        json_object_set_new(c, "overhead", json_real(1.5 * factor[i]));
        add(cur, c);
    }
    return run(prev, cur);
}

static void overhead_growing_in_most_cases_is_a_regression(void **state)
{
    (void)state;
    const double f[] = {1.2, 1.15, 1.3, 1.0, 1.25};
    struct outcome o = overheads(5, f);
    assert_int_equal(o.n.regressions, 1);
    assert_non_null(strstr(o.text, "REGRESSION  r: overhead median change +20.0% over 5 case(s)"));
    free(o.text);
}

static void overhead_outliers_do_not_move_the_median(void **state)
{
    (void)state;
    const double f[] = {3.0, 1.02, 0.97, 2.5, 1.0};
    struct outcome o = overheads(5, f);
    assert_int_equal(o.n.regressions, 0);
    free(o.text);
}

static void overhead_of_too_few_cases_is_not_judged(void **state)
{
    (void)state;
    const double f[] = {2.0, 2.0, 2.0, 2.0};
    struct outcome o = overheads(4, f);
    assert_int_equal(o.n.regressions, 0);
    assert_non_null(strstr(o.text, "too few to judge"));
    free(o.text);
}

static void overhead_of_failing_runs_is_ignored(void **state)
{
    (void)state;
    json_t *prev = summary(), *cur = summary();
    for (int i = 0; i < 6; i++) {
        char name[16];
        snprintf(name, sizeof name, "c%d", i);
        add(prev, rec(name, "bug", "FAIL", 1));
        json_t *c = rec(name, "bug", "FAIL", 1);
        json_object_set_new(c, "overhead", json_real(9.0));
        add(cur, c);
    }
    struct outcome o = run(prev, cur);
    assert_int_equal(o.n.regressions, 0);
    assert_null(strstr(o.text, "overhead median"));
    free(o.text);
}

static void new_and_removed_records_are_listed_not_counted(void **state)
{
    (void)state;
    json_t *prev = summary(), *cur = summary();
    add(prev, rec("gone", "reentrant", "PASS", 1));
    add(cur, rec("fresh", "reentrant", "FAIL", 0));
    struct outcome o = run(prev, cur);
    assert_int_equal(o.n.regressions, 0);
    assert_int_equal(o.n.added, 1);
    assert_int_equal(o.n.removed, 1);
    assert_non_null(strstr(o.text, "  new         fresh/reentrant: FAIL\n"));
    assert_non_null(strstr(o.text, "  removed     1 record(s) of 1 case(s) in PREV are not in this run, compared only "
                                   "the 0 in both: gone/reentrant (was PASS)\n"));
    free(o.text);
}

/* A subset run against a full nightly: the records it did not run are one
 * line (how many, of how many cases, the first three), not one each;
 * asked for (list_removed), one line each. */
static void records_not_in_a_subset_run_are_one_line_unless_asked(void **state)
{
    (void)state;
    for (int listing = 0; listing <= 1; listing++) {
        json_t *prev = summary(), *cur = summary();
        char name[32];
        for (int c = 0; c < 100; c++)
            for (int k = 0; k < 2; k++) {
                snprintf(name, sizeof name, "case_%03d", c);
                add(prev, rec(name, k ? "nonreentrant" : "reentrant", "PASS", 1));
                if (c == 7)
                    add(cur, rec(name, k ? "nonreentrant" : "reentrant", "PASS", 1));
            }
        struct outcome o = run_listing(prev, cur, listing);
        assert_int_equal(o.n.removed, 198);
        int lines = 0;
        for (const char *at = o.text; (at = strstr(at, "  removed  ")); at++)
            lines++;
        if (listing) {
            assert_int_equal(lines, 198);
            assert_non_null(strstr(o.text, "  removed     case_099/nonreentrant: was PASS\n"));
        } else {
            assert_int_equal(lines, 1);
            assert_non_null(strstr(o.text, "198 record(s) of 99 case(s) in PREV are not in this run, compared only the "
                                           "2 in both: case_000/reentrant (was PASS), case_000/nonreentrant (was PASS), "
                                           "case_001/reentrant (was PASS), ... (--list-removed names every one)\n"));
        }
        free(o.text);
    }
}

static void not_observable_changes_are_listed_not_counted(void **state)
{
    (void)state;
    struct outcome o = pair(rec("a", "bug", "NOT_OBSERVABLE", 1), rec("a", "bug", "FAIL", 1));
    assert_int_equal(o.n.regressions, 0);
    assert_int_equal(o.n.changed, 1);
    free(o.text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(identical_runs_have_no_findings),
        cmocka_unit_test(worse_verdict_is_a_regression),
        cmocka_unit_test(memfail_to_error_is_a_regression),
        cmocka_unit_test(better_verdict_is_an_improvement),
        cmocka_unit_test(planted_bug_no_longer_caught_is_a_regression),
        cmocka_unit_test(pass_to_noise_where_the_baseline_was_noisy_is_noise),
        cmocka_unit_test(pass_to_noise_of_a_deterministic_case_is_a_regression),
        cmocka_unit_test(grown_distance_is_a_regression),
        cmocka_unit_test(grown_raw_distance_alone_is_not_a_regression),
        cmocka_unit_test(infinite_distance_is_larger_than_any),
        cmocka_unit_test(an_older_summarys_noise_floor_is_read),
        cmocka_unit_test(a_fail_whose_distance_wobbles_is_not_a_regression),
        cmocka_unit_test(each_regression_is_listed_for_summary_and_junit),
        cmocka_unit_test(grown_distance_within_noise_is_not_a_regression),
        cmocka_unit_test(memory_saved_shrinking_over_two_points_is_a_regression),
        cmocka_unit_test(memory_saved_shrinking_by_two_points_or_less_is_not),
        cmocka_unit_test(the_held_cut_shrinking_over_two_points_is_a_regression),
        cmocka_unit_test(a_user_run_holding_more_above_its_statement_is_a_regression),
        cmocka_unit_test(a_statement_gap_moving_within_the_floor_is_not),
        cmocka_unit_test(overhead_growing_in_most_cases_is_a_regression),
        cmocka_unit_test(overhead_outliers_do_not_move_the_median),
        cmocka_unit_test(overhead_of_too_few_cases_is_not_judged),
        cmocka_unit_test(overhead_of_failing_runs_is_ignored),
        cmocka_unit_test(new_and_removed_records_are_listed_not_counted),
        cmocka_unit_test(records_not_in_a_subset_run_are_one_line_unless_asked),
        cmocka_unit_test(not_observable_changes_are_listed_not_counted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
