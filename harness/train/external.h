/* external: another producer's runs appended to a harness report. After a
 * case has run, `--external CMD` runs CMD with a copy of the case's report
 * as its last argument; CMD appends its own runs (docs/schema.md), and the
 * copy replaces the report only when CMD succeeded, kept every run it found
 * and left a file that judges cleanly. Otherwise the report stays as the
 * harness wrote it and the error names the command and the problem. */
#ifndef CKPT_EXTERNAL_H
#define CKPT_EXTERNAL_H

#include "judge.h"

/* Runs `command "<copy of report>"` through /bin/sh (its stdout goes to our
 * stderr, so the verdict table stays clean), then judges the result into
 * *out. ST_INPUT when the command fails, writes a malformed report or does
 * not finish within timeout_s seconds (<= 0: no limit; then its process
 * group is stopped: SIGTERM, SIGKILL a second later). */
#define EXTERNAL_TIMEOUT_DEFAULT_S 600.0
int external_append_runs(const char *command, double timeout_s, const char *report, struct case_result *out);

#endif
