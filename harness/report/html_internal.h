/* html_internal: what html.c and html_case.c share (internal to
 * harness/report/): the summary as the page reads it, its cases in order
 * of first appearance, and the formatters both use. */
#ifndef CKPT_HTML_INTERNAL_H
#define CKPT_HTML_INTERNAL_H

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>

#include "verdict_colour.h"

struct html_plots;

struct html_case {
    const char *name; /* owned by root */
    int first;        /* index of its first record */
};

struct html_run {
    json_t *root, *records; /* summary.json; records borrowed from root */
    int n_cases;
    struct html_case *cases;
    int *case_of;           /* per record: its case's index */
    int unexpected, n_regressions;
    const struct html_plots *plots;
};

void html_run_free(struct html_run *run);
/* The case's index (its section is #case-<index + 1>), -1 when none. */
int html_case_index(const struct html_run *run, const char *name);
/* Writes the section of every case (html_case.c). */
void html_put_cases(FILE *out, const struct html_run *run);

/* The formatters (html_format.c). "48.0 MiB", "12.5%", "1.32x?" ("?": the baselines' timings disagreed),
 * the verdict distance ("-" none measured, "inf"); "-" for NaN. */
const char *html_bytes(double v, char *buf, size_t len);
const char *html_percent(double v, char *buf, size_t len);
const char *html_overhead(const json_t *rec, char *buf, size_t len);
const char *html_distance(const json_t *rec, char *buf, size_t len, double *sort_key);
int html_expected(const json_t *rec);
/* The record's colour (verdict_colour.h: the determinism plot's rule), the
 * word its verdict column shows ("n/j" for a twin not judged), what was
 * expected of it in words ("as expected (PASS|NOISE)", "UNEXPECTED:
 * expected FAIL"), and the colour classes' CSS. */
enum verdict_colour html_colour(const json_t *rec);
const char *html_verdict_word(const json_t *rec);
const char *html_expectation(const json_t *rec, char *buf, size_t len);
void html_put_colour_style(FILE *out);
/* The record's case labels as space-separated words. */
void html_labels(const json_t *rec, char *buf, size_t len);

#endif
