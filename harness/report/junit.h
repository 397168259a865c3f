/* junit: junit.xml from a summary (the JSON of summary.json), in the shape
 * the Jenkins, GitLab and GitHub reporters read:
 *   <testsuites> <testsuite name="ckpt-verify[.SUITE]" tests failures errors
 *   skipped time> <testcase classname="ckpt-verify.CASE" name="IMPL" time>
 * Outcome per record, decided by the case's expectation, not the verdict
 * alone (an expected FAIL of a planted bug is a pass; an unexpected PASS of
 * one is a failure):
 *   verdict expected              -> passed, verdict in <properties>
 *   expected NOT_OBSERVABLE       -> <skipped> (the bug cannot show here)
 *   unexpected ERROR              -> <error message=reason>
 *   any other unexpected verdict  -> <failure message=reason>reason and
 *                                    first divergence</failure>
 * Every testcase carries properties verdict, expected, max_scaled_ulp (the
 * verdict's distance, as the table prints it; absent where none was
 * measured), raw_max_ulp, held_cut, peak_cut, memory_saved (peak_cut's older name), overhead (and
 * first_divergence when there is one) and the
 * reason as system-out. A testcase's time is its case's wall time shared
 * equally by the case's impls (the runs are timed as a case). Every text is
 * XML-escaped; characters XML 1.0 cannot hold become U+FFFD. Each entry
 * of the summary's "regressions" (a --compare-to run) is one more failing
 * testcase, classname "ckpt-verify.regressions", name "CASE/IMPL". */
#ifndef CKPT_JUNIT_H
#define CKPT_JUNIT_H

#include <jansson.h>
#include <stdio.h>

struct junit_counts {
    int tests, failures, errors, skipped;
    double seconds;
};

/* Writes the document to out; counts (may be NULL) get the totals. */
int junit_render(const json_t *summary, FILE *out, struct junit_counts *counts);
/* Writes DIR/junit.xml atomically (temporary name, then rename). */
int junit_write(const json_t *summary, const char *dir, struct junit_counts *counts);
/* Writes DIR/summary.json and DIR/junit.xml as one set: both are written
 * to temporaries before either is renamed into place, so a disk that holds
 * one but not the other keeps the previous pair. */
int junit_write_with_summary(const json_t *summary, const char *dir, struct junit_counts *counts);

#endif
