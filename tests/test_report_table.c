/* Unit tests for the terminal table (report_print_case): each test prints a
 * hand-built case result and pins one rule of its layout. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "judge.h"
#include "report.h"

static void add_result(struct case_result *r, const char *impl, enum verdict v, double overhead)
{
    struct impl_result *x = &r->results[r->n_results++];
    memset(x, 0, sizeof *x);
    snprintf(x->impl, sizeof x->impl, "%s", impl);
    x->verdict = v;
    x->expected = 1;
    x->overhead = overhead;
    x->timing_stable = 1;
    x->memory_saved = 0.25;
    x->end_forward_saved = 0.5;
    text_setf(&x->reason, "bitwise identical");
}

static char *print(const struct case_result *r)
{
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    assert_non_null(mem);
    report_print_case(mem, r);
    fclose(mem);
    return text;
}

/* The line of text that starts with "  <first>" followed by a space. */
static char *line_of(const char *text, const char *first)
{
    char key[256];
    snprintf(key, sizeof key, "\n  %s ", first);
    const char *at = strstr(text, key);
    if (!at)
        fail_msg("no line for %s in:\n%s", first, text);
    return strndup(at + 1, strcspn(at + 1, "\n"));
}

/* Where the word `word` ends in line (its last character + 1). */
static long end_of(const char *line, const char *word)
{
    const char *at = strstr(line, word);
    if (!at)
        fail_msg("no '%s' in '%s'", word, line);
    return (long)(at - line) + (long)strlen(word);
}

static long start_of(const char *line, const char *word)
{
    const char *at = strstr(line, word);
    if (!at)
        fail_msg("no '%s' in '%s'", word, line);
    return (long)(at - line);
}

static void a_long_impl_name_keeps_every_column_in_line(void **state)
{
    (void)state;
    static struct case_result r;
    memset(&r, 0, sizeof r);
    snprintf(r.name, sizeof r.name, "k");
    r.baseline_runs = 2;
    const char *long_name = "my_framework_selective_checkpoint_wrapper_v2";
    add_result(&r, "reentrant", V_PASS, 1.25);
    add_result(&r, long_name, V_PASS, 1.31);
    char *text = print(&r);
    char *header = line_of(text, "impl"), *a = line_of(text, "reentrant"), *b = line_of(text, long_name);
    /* left-aligned columns start together, right-aligned ones end together */
    assert_int_equal(start_of(a, "PASS"), start_of(header, "verdict"));
    assert_int_equal(start_of(b, "PASS"), start_of(header, "verdict"));
    assert_int_equal(end_of(a, "1.25x"), end_of(header, "overhead"));
    assert_int_equal(end_of(b, "1.31x"), end_of(header, "overhead"));
    assert_int_equal(end_of(b, "50.0%"), end_of(header, "held cut"));
    /* the name is whole, not cut */
    assert_non_null(strstr(b, long_name));
    free(header);
    free(a);
    free(b);
    free(text);
}

/* A twin its run's own verdict explains is not judged: its row shows "n/j"
 * where the verdict stands (and "-" for ok), never the verdict it measured. */
static void a_twin_not_judged_shows_n_j_in_the_verdict_column(void **state)
{
    (void)state;
    static struct case_result r;
    memset(&r, 0, sizeof r);
    snprintf(r.name, sizeof r.name, "k");
    r.baseline_runs = 2;
    add_result(&r, "mine", V_FAIL, NAN);
    add_result(&r, "mine_vs_single", V_NOISE, NAN);
    r.results[1].not_judged = 1;
    char *text = print(&r);
    char *header = line_of(text, "impl"), *twin = line_of(text, "mine_vs_single");
    assert_int_equal(start_of(twin, "n/j"), start_of(header, "verdict"));
    assert_int_equal(twin[start_of(header, " ok ") + 1], '-'); /* no "yes": nothing was judged */
    assert_null(strstr(twin, "NOISE"));
    free(header);
    free(twin);
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_long_impl_name_keeps_every_column_in_line),
        cmocka_unit_test(a_twin_not_judged_shows_n_j_in_the_verdict_column),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
