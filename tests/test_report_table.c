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
#include <jansson.h>

#include "error.h"
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

/* Not inlined: GCC takes the memstream's buffer for a local that dies here. */
__attribute__((noinline)) static char *print(const struct case_result *r)
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
    case_result_free(&r);
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
    case_result_free(&r);
}

/* words of 8 bytes and a space ("w0000001 w0000002 ...") up to n bytes,
 * then the marker: a reason whose every part can be found. */
static void long_reason(struct text *t, size_t n, const char *marker)
{
    text_clear(t);
    for (int i = 1; text_len(t) + 9 <= n; i++)
        text_appendf(t, "w%07d ", i);
    text_append(t, marker);
}

/* Past REPORT_TABLE_REASON_MAX bytes the table shows the reason's start, up
 * to a word, and a marker naming how many bytes it left out and where the
 * whole is; summary.json carries it whole. */
static void the_table_shortens_a_long_reason_and_summary_json_has_it_whole(void **state)
{
    (void)state;
    static struct case_result r;
    memset(&r, 0, sizeof r);
    snprintf(r.name, sizeof r.name, "k");
    r.baseline_runs = 2;
    add_result(&r, "mine", V_FAIL, NAN);
    long_reason(&r.results[0].reason, 5000, "LAST-WORDS-OF-THE-REASON");
    const char *whole = text_str(&r.results[0].reason);
    char *text = print(&r);
    assert_null(strstr(text, "LAST-WORDS-OF-THE-REASON"));
    const char *at = strstr(text, "w0000001 w0000002");
    assert_non_null(at);
    const char *cut = strstr(at, " ... [");
    assert_non_null(cut);
    size_t shown = (size_t)(cut - at);
    assert_true(shown <= REPORT_TABLE_REASON_MAX && shown > REPORT_TABLE_REASON_MAX / 2);
    assert_memory_equal(at, whole, shown);
    assert_int_equal(whole[shown], ' '); /* at a word boundary */
    char marker[160];
    snprintf(marker, sizeof marker,
             " ... [%zu more bytes; the whole reason is in summary.json, report.html and junit.xml]\n",
             strlen(whole) - shown);
    assert_memory_equal(cut, marker, strlen(marker));

    struct summary *s = NULL;
    struct summary_torch torch = {NULL, NULL, NULL};
    assert_int_equal(summary_create(&s, "rev", "0", &torch), ST_OK);
    assert_int_equal(summary_add_case(s, &r), ST_OK);
    json_t *rec = json_array_get(json_object_get((json_t *)summary_json(s), "records"), 0);
    assert_string_equal(json_string_value(json_object_get(rec, "reason")), whole);
    summary_free(s);
    free(text);
    case_result_free(&r);
}

/* A reason within the limit is shown whole, with no marker. */
static void a_reason_within_the_limit_is_shown_whole(void **state)
{
    (void)state;
    static struct case_result r;
    memset(&r, 0, sizeof r);
    snprintf(r.name, sizeof r.name, "k");
    add_result(&r, "mine", V_FAIL, NAN);
    long_reason(&r.results[0].reason, REPORT_TABLE_REASON_MAX - 8, "THE-END");
    assert_true(text_len(&r.results[0].reason) <= REPORT_TABLE_REASON_MAX);
    char *text = print(&r);
    assert_non_null(strstr(text, text_str(&r.results[0].reason)));
    assert_null(strstr(text, " more bytes; the whole reason is in"));
    free(text);
    case_result_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_long_impl_name_keeps_every_column_in_line),
        cmocka_unit_test(a_twin_not_judged_shows_n_j_in_the_verdict_column),
        cmocka_unit_test(the_table_shortens_a_long_reason_and_summary_json_has_it_whole),
        cmocka_unit_test(a_reason_within_the_limit_is_shown_whole),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
