/* judge_internal: what judge.c shares with judge_file.c, which reads a
 * report's runs and finds the ones it lacks; not for other callers. */
#ifndef CKPT_JUDGE_INTERNAL_H
#define CKPT_JUDGE_INTERNAL_H

#include <stddef.h>

#include "judge.h"
#include "run_record.h"

/* A run that cannot be judged because the report lacks it, or holds only
 * part of it: its ERROR record (judge_file). */
struct gone_run {
    char name[64];
    /* Run names, the report's path (PATH_MAX, 4096) and a tensor's path:
     * bounded by construction. */
    char reason[8192];
    char first_missing[RUN_PATH_MAX + 16];
};

/* Length of the family of "<family>_<k>" when the family is "baseline" or
 * ends in "_baseline"; 0 otherwise. */
size_t judge_baseline_family_len(const char *run);

/* runs[] by name, or NULL. */
const struct run_record *judge_find_run(const struct run_record *runs, int n, const char *name);

/* 1 when run is "<of>_rerun_<k>" for some run <of>. */
int judge_is_rerun(const char *run);

/* Judges the runs named in order, in that order; gone (n_gone) lists the
 * runs a file lacks or holds incomplete, each an ERROR in its place. */
int judge_listed(const struct ckpt_case *c, const struct run_record *runs, int n, const char *const *order,
                 int n_order, const struct gone_run *gone, int n_gone, struct case_result *out);

#endif
