/* html_format: the small formatters the page's table (html.c) and its
 * case sections (html_case.c) share (html_internal.h): bytes, percentages,
 * overheads, distances and expectations as the summary records them. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "html_internal.h"
#include "summary_file.h"

const char *html_bytes(double v, char *buf, size_t len)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    if (isnan(v)) {
        snprintf(buf, len, "-");
        return buf;
    }
    while (u < 4 && fabs(v) >= 1024) {
        v /= 1024;
        u++;
    }
    snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", v, units[u]);
    return buf;
}

const char *html_percent(double v, char *buf, size_t len)
{
    if (isnan(v))
        snprintf(buf, len, "-");
    else
        snprintf(buf, len, "%.1f%%", 100.0 * v);
    return buf;
}

/* The verdict's distance as summary.json holds it: absent where none was
 * measured ("-"), null when infinite. *sort_key: a number to sort by. */
const char *html_distance(const json_t *rec, char *buf, size_t len, double *sort_key)
{
    const json_t *d = json_object_get(rec, "max_scaled_ulp");
    if (!d) {
        *sort_key = -1;
        snprintf(buf, len, "-");
    } else if (json_is_null(d)) {
        *sort_key = INFINITY;
        snprintf(buf, len, "inf");
    } else {
        *sort_key = json_number_value(d);
        snprintf(buf, len, "%.3g", *sort_key);
    }
    return buf;
}

const char *html_overhead(const json_t *rec, char *buf, size_t len)
{
    double v = summary_num(rec, "overhead");
    const json_t *stable = json_object_get(rec, "overhead_stable");
    if (isnan(v))
        snprintf(buf, len, "-");
    else
        snprintf(buf, len, "%.2fx%s", v, stable && json_is_false(stable) ? "?" : "");
    return buf;
}

int html_expected(const json_t *rec) { return summary_bool(rec, "expected"); }

/* A record without "judged" (older summaries) was judged. */
static int judged(const json_t *rec) { return !json_is_false(json_object_get(rec, "judged")); }

enum verdict_colour html_colour(const json_t *rec)
{
    return verdict_colour_of(html_expected(rec), summary_str(rec, "verdict"),
                             json_object_get(rec, "max_scaled_ulp") != NULL, judged(rec));
}

const char *html_verdict_word(const json_t *rec) { return judged(rec) ? summary_str(rec, "verdict") : "n/j"; }

const char *html_expectation(const json_t *rec, char *buf, size_t len)
{
    const char *wanted = summary_str(rec, "expected_verdicts");
    if (!judged(rec))
        snprintf(buf, len, "not judged (measured %s): its run's own verdict explains it", summary_str(rec, "verdict"));
    else if (html_expected(rec))
        snprintf(buf, len, "as expected%s%s%s", *wanted ? " (" : "", wanted, *wanted ? ")" : "");
    else
        snprintf(buf, len, "UNEXPECTED%s%s", *wanted ? ": expected " : "", wanted);
    return buf;
}

void html_put_colour_style(FILE *out)
{
    for (int c = 0; c < VC_COUNT; c++)
        fprintf(out, "td.%s,span.%s{background:#%06x}\n", verdict_colour_class((enum verdict_colour)c),
                verdict_colour_class((enum verdict_colour)c), verdict_colour_rgb((enum verdict_colour)c));
}

