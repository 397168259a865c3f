/* Unit tests for junit: each test renders a hand-built summary and pins one
 * rule of how records become testcases. The integration tests parse real
 * files with an XML parser (tests/check_junit.py). */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "error.h"
#include "junit.h"

static json_t *record(const char *c, const char *impl, const char *verdict, int expected, const char *reason)
{
    return json_pack("{s:s, s:s, s:s, s:b, s:s, s:s, s:i, s:f, s:f, s:f}", "case", c, "impl", impl, "verdict",
                     verdict, "expected", expected, "reason", reason, "first_divergence", "", "raw_max_ulp", 0,
                     "memory_saved", 0.5, "overhead", 1.25, "case_seconds", 1.0);
}

static json_t *summary_of(json_t *rec)
{
    json_t *s = json_pack("{s:s, s:s, s:[]}", "git_rev", "abc", "created_utc", "2026-01-02T03:04:05Z", "records");
    json_array_append_new(json_object_get(s, "records"), rec);
    return s;
}

/* Renders and returns the document (caller frees). */
static char *render(json_t *summary, struct junit_counts *counts)
{
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    assert_non_null(mem);
    assert_int_equal(junit_render(summary, mem, counts), ST_OK);
    fclose(mem);
    json_decref(summary);
    return text;
}

static void expected_fail_is_a_pass_with_its_verdict(void **state)
{
    (void)state;
    struct junit_counts c;
    char *x = render(summary_of(record("k", "no_rng_stash", "FAIL", 1, "caught")), &c);
    assert_int_equal(c.failures, 0);
    assert_null(strstr(x, "<failure"));
    assert_non_null(strstr(x, "<property name=\"verdict\" value=\"FAIL\"/>"));
    free(x);
}

static void unexpected_pass_is_a_failure(void **state)
{
    (void)state;
    struct junit_counts c;
    char *x = render(summary_of(record("k", "stale_input", "PASS", 0, "not caught")), &c);
    assert_int_equal(c.failures, 1);
    assert_non_null(strstr(x, "<failure message=\"unexpected PASS: not caught\" type=\"PASS\">"));
    free(x);
}

/* A run whose records all pass but that regressed against --compare-to's
 * run exits 1: its junit.xml says failures="1", never "0". */
static void a_regression_is_a_failing_testcase(void **state)
{
    (void)state;
    json_t *s = summary_of(record("k", "reentrant", "PASS", 1, "bitwise identical"));
    json_object_set_new(s, "regressions",
                        json_pack("[{s:s, s:s, s:s, s:s}]", "case", "k", "impl", "reentrant", "finding",
                                  "memory saved 40.0% -> 30.0% (-10.0 points)", "against", "nightly/prev"));
    struct junit_counts c;
    char *x = render(s, &c);
    assert_int_equal(c.tests, 2);
    assert_int_equal(c.failures, 1);
    assert_non_null(strstr(x, "tests=\"2\" failures=\"1\""));
    assert_non_null(strstr(x, "<testcase classname=\"ckpt-verify.regressions\" name=\"k/reentrant\""));
    assert_non_null(strstr(x, "<failure message=\"regression against nightly/prev: memory saved 40.0% -&gt; 30.0% "
                              "(-10.0 points)\" type=\"REGRESSION\">"));
    free(x);
}

static void failure_text_names_the_first_divergence(void **state)
{
    (void)state;
    json_t *rec = record("k", "reentrant", "FAIL", 0, "differs");
    json_object_set_new(rec, "first_divergence", json_string("steps/1/grads/l0.weight [0, 0]"));
    char *x = render(summary_of(rec), NULL);
    assert_non_null(strstr(x, ">differs\nfirst divergence: steps/1/grads/l0.weight [0, 0]</failure>"));
    free(x);
}

static void unexpected_error_is_an_error(void **state)
{
    (void)state;
    struct junit_counts c;
    char *x = render(summary_of(record("k", "*", "ERROR", 0, "cannot run")), &c);
    assert_int_equal(c.errors, 1);
    assert_int_equal(c.failures, 0);
    assert_non_null(strstr(x, "<error message=\"unexpected ERROR: cannot run\""));
    free(x);
}

static void expected_not_observable_is_skipped(void **state)
{
    (void)state;
    struct junit_counts c;
    char *x = render(summary_of(record("k", "no_rng_stash", "NOT_OBSERVABLE", 1, "no dropout")), &c);
    assert_int_equal(c.skipped, 1);
    assert_non_null(strstr(x, "<skipped message=\"no dropout\"/>"));
    free(x);
}

static void noise_passes_with_its_verdict(void **state)
{
    (void)state;
    struct junit_counts c;
    char *x = render(summary_of(record("k", "reentrant", "NOISE", 1, "within the floor")), &c);
    assert_int_equal(c.failures + c.errors + c.skipped, 0);
    assert_non_null(strstr(x, "<property name=\"verdict\" value=\"NOISE\"/>"));
    free(x);
}

static void names_follow_the_case_and_impl(void **state)
{
    (void)state;
    char *x = render(summary_of(record("bias_gelu_bs1", "reentrant", "PASS", 1, "ok")), NULL);
    assert_non_null(strstr(x, "<testcase classname=\"ckpt-verify.bias_gelu_bs1\" name=\"reentrant\" time=\"1.000\">"));
    free(x);
}

static void markup_is_escaped_in_attributes_and_text(void **state)
{
    (void)state;
    char *x = render(summary_of(record("k", "reentrant", "FAIL", 0, "<a href=\"x\">&'")), NULL);
    assert_non_null(strstr(x, "message=\"unexpected FAIL: &lt;a href=&quot;x&quot;&gt;&amp;&apos;\""));
    assert_non_null(strstr(x, "<system-out>&lt;a href=&quot;x&quot;&gt;&amp;&apos;</system-out>"));
    free(x);
}

static void newlines_in_attributes_are_references(void **state)
{
    (void)state;
    char *x = render(summary_of(record("k", "reentrant", "FAIL", 0, "one\ntwo")), NULL);
    assert_non_null(strstr(x, "message=\"unexpected FAIL: one&#10;two\""));
    free(x);
}

static void characters_xml_cannot_hold_become_replacement(void **state)
{
    (void)state;
    /* U+0001 and U+FFFF are not XML 1.0 characters; U+00E9 is. */
    char *x = render(summary_of(record("k", "reentrant", "PASS", 1, "a\x01" "b\xEF\xBF\xBF" "c\xC3\xA9")), NULL);
    assert_non_null(strstr(x, "<system-out>a\xEF\xBF\xBD" "b\xEF\xBF\xBD" "c\xC3\xA9</system-out>"));
    free(x);
}

static void counts_and_case_time_add_up(void **state)
{
    (void)state;
    json_t *s = summary_of(record("a", "reentrant", "PASS", 1, ""));
    json_array_append_new(json_object_get(s, "records"), record("a", "nonreentrant", "FAIL", 0, ""));
    json_array_append_new(json_object_get(s, "records"), record("b", "reentrant", "PASS", 1, ""));
    struct junit_counts c;
    char *x = render(s, &c);
    assert_int_equal(c.tests, 3);
    assert_int_equal(c.failures, 1);
    /* Case a's 1 s is shared by its two impls; b's 1 s is b's alone. */
    assert_non_null(strstr(x, "name=\"nonreentrant\" time=\"0.500\""));
    assert_non_null(strstr(x, "<testsuites name=\"ckpt-verify\" tests=\"3\" failures=\"1\" errors=\"0\" skipped=\"0\" "
                              "time=\"2.000\">"));
    free(x);
}

static void timestamp_has_no_zone(void **state)
{
    (void)state;
    char *x = render(summary_of(record("k", "reentrant", "PASS", 1, "")), NULL);
    assert_non_null(strstr(x, "timestamp=\"2026-01-02T03:04:05\">"));
    free(x);
}

static void write_leaves_only_the_file(void **state)
{
    (void)state;
    char dir[] = "/tmp/test_junit_XXXXXX";
    assert_non_null(mkdtemp(dir));
    json_t *s = summary_of(record("k", "reentrant", "PASS", 1, ""));
    assert_int_equal(junit_write(s, dir, NULL), ST_OK);
    json_decref(s);
    char path[256];
    struct stat sb;
    snprintf(path, sizeof path, "%s/junit.xml", dir);
    assert_int_equal(stat(path, &sb), 0);
    assert_true(sb.st_size > 0);
    remove(path);
    snprintf(path, sizeof path, "%s/junit.xml.tmp", dir);
    assert_int_not_equal(stat(path, &sb), 0);
    assert_int_equal(rmdir(dir), 0); /* fails if anything else was left */
}

static void write_to_a_missing_directory_is_an_input_error(void **state)
{
    (void)state;
    json_t *s = summary_of(record("k", "reentrant", "PASS", 1, ""));
    assert_int_equal(junit_write(s, "/nonexistent/dir", NULL), ST_INPUT);
    json_decref(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(expected_fail_is_a_pass_with_its_verdict),
        cmocka_unit_test(unexpected_pass_is_a_failure),
        cmocka_unit_test(a_regression_is_a_failing_testcase),
        cmocka_unit_test(failure_text_names_the_first_divergence),
        cmocka_unit_test(unexpected_error_is_an_error),
        cmocka_unit_test(expected_not_observable_is_skipped),
        cmocka_unit_test(noise_passes_with_its_verdict),
        cmocka_unit_test(names_follow_the_case_and_impl),
        cmocka_unit_test(markup_is_escaped_in_attributes_and_text),
        cmocka_unit_test(newlines_in_attributes_are_references),
        cmocka_unit_test(characters_xml_cannot_hold_become_replacement),
        cmocka_unit_test(counts_and_case_time_add_up),
        cmocka_unit_test(timestamp_has_no_zone),
        cmocka_unit_test(write_leaves_only_the_file),
        cmocka_unit_test(write_to_a_missing_directory_is_an_input_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
