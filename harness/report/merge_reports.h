/* merge_reports: a merged run directory holds its cases' HDF5 reports, so
 * it can be moved, archived or judged again on another machine: each
 * record's report is hard-linked (copied across file systems) into the
 * merged directory and the record's `h5` names it relative to that
 * directory. Used by merge.c once the merge is known to be written. */
#ifndef CKPT_MERGE_REPORTS_H
#define CKPT_MERGE_REPORTS_H

#include <jansson.h>
#include <stdio.h>

/* For every record of every input (roots[i] read from dirs[i]) whose `h5`
 * is a string: the report is looked for in its input directory (by its
 * file name: a CI job's artifact no longer sits at the path the job
 * wrote), then at the path as written; found, it is put into out_dir
 * under its file name (another input's report of the same name gets its
 * input's number in front) and the record's `h5` becomes that name; not
 * found, `h5` becomes null and one warning line on `out` counts them.
 * Records are changed in place. ST_RUN when a report cannot be written
 * (a full disk), naming it. */
int merge_adopt_reports(const char *out_dir, json_t *const *roots, const char *const *dirs, int n, FILE *out);

#endif
