/* stale_reports: a run directory reused with --out holds its latest run's
 * reports only. The .h5 files the previous summary.json there named (files
 * this tool wrote) that the new run did not write again are removed once
 * the new summary is written, and one line says how many; a file the
 * previous summary did not name is never touched. */
#ifndef CKPT_STALE_REPORTS_H
#define CKPT_STALE_REPORTS_H

#include <jansson.h>
#include <stdio.h>

/* Before the run: the reports out_dir's summary.json names that lie in
 * out_dir (a set of resolved paths; empty when there is no summary or it
 * cannot be read: then nothing is removed). Never fails; NULL when out of
 * memory. */
json_t *stale_reports_before(const char *out_dir);
/* After the new summary is written: removes the reports of `before` that
 * `summary` (the new run's) does not name, and says so in one line on out.
 * Returns how many were removed. */
int stale_reports_clear(const char *out_dir, const json_t *before, const json_t *summary, FILE *out);

#endif
