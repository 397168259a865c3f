/* report: what a run shows people and machines — the terminal table per
 * case (impl, verdict, max ULP, first divergence, memory saved, time
 * overhead) and summary.json (one record per case × impl), written to a
 * temporary name and renamed. */
#ifndef CKPT_REPORT_H
#define CKPT_REPORT_H

#include <stdio.h>

#include "runner.h"

void report_print_case(FILE *out, const struct case_result *r);

struct summary;
int summary_create(struct summary **out, const char *git_rev, const char *harness_version);
int summary_add_case(struct summary *s, const struct case_result *r);
/* Writes DIR/summary.json atomically. */
int summary_write(const struct summary *s, const char *dir);
void summary_free(struct summary *s);

#endif
