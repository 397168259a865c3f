/* report: what a run shows people and machines — the terminal table per
 * case (impl, verdict, scaled ULP, first divergence, memory saved, time
 * overhead) and summary.json (one record per case × impl, each carrying the
 * harness, libtorch and git versions so merged shards stay traceable),
 * written to a temporary name and renamed. */
#ifndef CKPT_REPORT_H
#define CKPT_REPORT_H

#include <stdio.h>

#include "judge.h"

/* The table shows a reason whole up to REPORT_TABLE_REASON_MAX bytes; a
 * longer one is shortened at a word boundary, ending in a marker that says
 * how many bytes were left out and that summary.json, report.html and
 * JUnit carry it whole. */
#define REPORT_TABLE_REASON_MAX 1000
void report_print_case(FILE *out, const struct case_result *r);
/* The one distance a verdict shows everywhere: the largest distance of any
 * tensor from baseline_0 in scaled ULP (ULPs of its dtype at its max |x|);
 * NAN where none was measured (an ERROR, a FAIL before any gradient). */
double report_verdict_distance(const struct impl_result *x);

struct summary;
/* The torch the summary's runs were made with, as its root records it
 * (libtorch_version, torch_cuda, torch_pinned): the training side passes
 * its own libtorch; the judge, the torch its reports name. NULL or ""
 * fields are unknown (null in summary.json). */
struct summary_torch {
    const char *version, *cuda, *pinned;
};
int summary_create(struct summary **out, const char *git_rev, const char *harness_version,
                   const struct summary_torch *torch);
int summary_add_case(struct summary *s, const struct case_result *r);
/* summary_add_case, plus the case's position in the selected list (merge
 * restores that order across shards) and its wall time in seconds. */
int summary_add_case_run(struct summary *s, const struct case_result *r, int case_index, double seconds);
/* Top-level facts of the run: the suite label (NULL: none) and the shard
 * (k of n, 1-based; n = 1 when not sharded). */
int summary_set_run(struct summary *s, const char *suite, int shard_k, int shard_n);
/* The summary as JSON, owned by s: what junit.xml and --compare-to read. */
const struct json_t *summary_json(const struct summary *s);
/* The same, to change (a shared --out merges a concurrent run's records in: stale_reports_merge). */
struct json_t *summary_root(struct summary *s);
/* Records the regressions a --compare-to found (a JSON array, regress.h)
 * as summary.json's "regressions"; junit.xml renders each as a failure. */
int summary_set_regressions(struct summary *s, struct json_t *regressions);
/* Sets the summary's wall_seconds: the seconds since this process
 * started, measured (library loading included; the header of report.html
 * states it). Called just before the summary is written. */
void summary_set_wall_time(struct summary *s);
/* Writes DIR/summary.json atomically. */
int summary_write(const struct summary *s, const char *dir);
void summary_free(struct summary *s);

#endif
