/* merge: one report from the run directories of shards (--shard K/N) or of
 * any runs: their summary.json records, concatenated and put back in the
 * selected order (each record's case_index; records without one keep their
 * input order, after the indexed ones), written to OUT_DIR as summary.json
 * and junit.xml. A case × impl that two inputs both hold is an input error
 * (the same shard given twice); inputs from different git revisions, and
 * shards of one N of which some are not given, are warned about on `out`.
 * Plots are the caller's (the CLI draws them as `plot` does). */
#ifndef CKPT_MERGE_H
#define CKPT_MERGE_H

#include <stdio.h>

/* out_dir exists. *unexpected gets the number of records whose verdict was
 * not the expected one (the merged run's exit status follows it). */
/* strict: a shard of the inputs' N that is missing is an input error
 * (ST_INPUT) before anything is written, instead of a warning. */
int merge_run_dirs(const char *out_dir, const char *const *dirs, int n_dirs, int strict, FILE *out, int *unexpected);

#endif
