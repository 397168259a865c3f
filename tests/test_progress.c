/* Unit tests for progress: quiet off a terminal unless asked, the per-case
 * line, and the redrawn status line with elapsed time and estimate. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "progress.h"

static void two_impls(struct case_result *r)
{
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "gpt_none");
    r->n_results = 2;
    snprintf(r->results[0].impl, sizeof r->results[0].impl, "reentrant");
    r->results[0].verdict = V_PASS;
    r->results[0].expected = 1;
    snprintf(r->results[1].impl, sizeof r->results[1].impl, "nonreentrant");
    r->results[1].verdict = V_PASS;
    r->results[1].expected = 1;
}

static void case_line_lists_each_impl_and_time(void **state)
{
    (void)state;
    struct case_result r;
    two_impls(&r);
    char line[256];
    progress_case_text(line, sizeof line, 2, 30, &r, 0.04);
    assert_string_equal(line, "[3/30] gpt_none: reentrant PASS, nonreentrant PASS (0.04 s)");
}

static void case_line_marks_unexpected_verdicts(void **state)
{
    (void)state;
    struct case_result r;
    two_impls(&r);
    r.results[1].verdict = V_FAIL;
    r.results[1].expected = 0;
    char line[256];
    progress_case_text(line, sizeof line, 0, 1, &r, 1.5);
    assert_string_equal(line, "[1/1] gpt_none: reentrant PASS, nonreentrant FAIL (unexpected) (1.50 s)");
}

static void case_line_of_a_case_that_could_not_run(void **state)
{
    (void)state;
    struct case_result r;
    memset(&r, 0, sizeof r);
    snprintf(r.name, sizeof r.name, "x");
    snprintf(r.error, sizeof r.error, "no CUDA");
    char line[256];
    progress_case_text(line, sizeof line, 0, 2, &r, 0.0);
    assert_string_equal(line, "[1/2] x: ERROR (no CUDA) (0.00 s)");
}

static void status_has_no_estimate_before_a_case_finished(void **state)
{
    (void)state;
    char line[256];
    progress_status_text(line, sizeof line, 0, 10, "a", 0.2);
    assert_string_equal(line, "[1/10] a  0:00 elapsed");
}

static void status_estimates_from_the_mean_case_time(void **state)
{
    (void)state;
    char line[256];
    /* 4 cases took 20 s: 5 s each, 6 left -> 30 s. */
    progress_status_text(line, sizeof line, 4, 10, "b", 20.0);
    assert_string_equal(line, "[5/10] b  0:20 elapsed, ~0:30 left");
}

static void status_shows_hours(void **state)
{
    (void)state;
    char line[256];
    progress_status_text(line, sizeof line, 1, 3, "c", 3725.0);
    assert_string_equal(line, "[2/3] c  1:02:05 elapsed, ~2:04:10 left");
}

/* Runs two cases through a progress of the given mode; returns what it wrote. */
static char *written_by(enum progress_mode mode, char *buf, size_t len)
{
    FILE *f = tmpfile();
    assert_non_null(f);
    struct progress p;
    struct case_result r;
    two_impls(&r);
    progress_init(&p, f, mode, 2);
    for (int i = 0; i < 2; i++) {
        progress_case_start(&p, i, r.name);
        progress_case_done(&p, i, &r, 0.5);
    }
    rewind(f);
    size_t n = fread(buf, 1, len - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void quiet_mode_writes_nothing(void **state)
{
    (void)state;
    char buf[512];
    assert_string_equal(written_by(PROGRESS_QUIET, buf, sizeof buf), "");
}

static void lines_mode_writes_one_line_per_finished_case(void **state)
{
    (void)state;
    char buf[512];
    assert_string_equal(written_by(PROGRESS_LINES, buf, sizeof buf),
                        "[1/2] gpt_none: reentrant PASS, nonreentrant PASS (0.50 s)\n"
                        "[2/2] gpt_none: reentrant PASS, nonreentrant PASS (0.50 s)\n");
}

static void terminal_mode_redraws_the_status_line_and_leaves_it_cleared(void **state)
{
    (void)state;
    char buf[512];
    const char *out = written_by(PROGRESS_TERMINAL, buf, sizeof buf);
    assert_non_null(strstr(out, "\r\033[K[1/2] gpt_none"));
    assert_non_null(strstr(out, "\r\033[K[2/2] gpt_none"));
    assert_null(strchr(out, '\n'));
    size_t n = strlen(out);
    assert_true(n >= 4 && strcmp(out + n - 4, "\r\033[K") == 0);
}

static void run_start_redraws_case_and_run_on_a_terminal_only(void **state)
{
    (void)state;
    char buf[512];
    for (int mode = PROGRESS_QUIET; mode <= PROGRESS_TERMINAL; mode++) {
        FILE *f = tmpfile();
        assert_non_null(f);
        struct progress p;
        progress_init(&p, f, (enum progress_mode)mode, 3);
        progress_run_start(&p, 0, "scale_mlp8_h2048", "baseline_1");
        rewind(f);
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = '\0';
        fclose(f);
        if (mode == PROGRESS_TERMINAL)
            assert_non_null(strstr(buf, "\r\033[K[1/3] scale_mlp8_h2048: baseline_1"));
        else
            assert_string_equal(buf, "");
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(case_line_lists_each_impl_and_time),
        cmocka_unit_test(case_line_marks_unexpected_verdicts),
        cmocka_unit_test(case_line_of_a_case_that_could_not_run),
        cmocka_unit_test(status_has_no_estimate_before_a_case_finished),
        cmocka_unit_test(status_estimates_from_the_mean_case_time),
        cmocka_unit_test(status_shows_hours),
        cmocka_unit_test(quiet_mode_writes_nothing),
        cmocka_unit_test(lines_mode_writes_one_line_per_finished_case),
        cmocka_unit_test(terminal_mode_redraws_the_status_line_and_leaves_it_cleared),
        cmocka_unit_test(run_start_redraws_case_and_run_on_a_terminal_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
