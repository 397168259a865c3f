/* stale_reports: a run directory that several runs may write at once. A
 * reused --out holds its latest run's reports: the .h5 files the previous
 * summary.json named that the new run did not write again are removed once
 * the new summary is written. Runs that overlap (CI jobs on one runner) keep
 * every report they announce: summary.json is read, merged and written under
 * an exclusive lock on the directory, a run that finds a summary written
 * since it started (a concurrent run's) keeps that run's records beside its
 * own, and a report is removed only when it is provably the one the run's
 * predecessor wrote (the same file, by device and inode, as when the run
 * started), never one a concurrent run wrote under the same name. */
#ifndef CKPT_STALE_REPORTS_H
#define CKPT_STALE_REPORTS_H

#include <jansson.h>
#include <stdio.h>

/* The exclusive lock on out_dir (flock on the directory itself: no file is
 * added to it), waited for at most CKPT_LOCK_TIMEOUT seconds (default 300:
 * a holder keeps it only to write a summary and its page). *fd is the lock
 * to pass to out_dir_unlock. ST_RUN naming the directory when it cannot
 * be had. */
int out_dir_lock(const char *out_dir, int *fd);
void out_dir_unlock(int fd);

/* Before the run, under the lock: what out_dir's summary.json says, as
 * {"summary_id": its id or null, "reports": {file name: {path, case, dev,
 * ino}}} for the reports it names that lie in out_dir (none when there is
 * no summary or it cannot be read: then nothing is removed). Never fails;
 * NULL when out of memory. */
json_t *stale_reports_before(const char *out_dir);
/* Records a report this run wrote (its file as it is now), so a concurrent
 * run's report later renamed over it is told from it. */
void stale_reports_own(json_t *before, const char *h5_path);
/* Under the lock, before the summary is written: when out_dir's summary is
 * not the one the run started with (a concurrent run wrote one since), its
 * records of cases this run did not run, and of cases whose report on disk
 * is now that run's, join `summary` (the new run's records). Every record
 * whose report no longer exists is dropped. Gives the summary a new
 * summary_id. ST_OK or ST_INTERNAL (out of memory). */
int stale_reports_merge(const char *out_dir, const json_t *before, json_t *summary);
/* Under the lock, after the new summary is written: removes the reports of
 * `before` that `summary` does not name and that are still the files they
 * were when the run started, and says so in one line on out. Returns how
 * many were removed. */
int stale_reports_clear(const char *out_dir, const json_t *before, const json_t *summary, FILE *out);

#endif
