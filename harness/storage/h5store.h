/* h5store: the HDF5 report file of one case (schema in DESIGN.md and
 * docs/schema.md), written on disk to "<path>.tmp" as the case runs and
 * renamed on commit so a killed run never leaves a half-written file; and the reader that loads any file
 * following the schema (ours, PyTorch cross-check's, another framework's)
 * into run_records. HDF5's own error printer is silenced; its failures come
 * back as one-line messages naming the file and the path inside it.
 * Written by h5store_write.c; read by h5store_open.c (opening a report
 * with its checks), h5store_read_dataset.c, h5store_read_attrs.c and
 * h5store_read_run.c. Every read of a dataset with a crc32 attribute
 * verifies it; a run is reached by hard links only (an external or soft
 * link where a run, group or dataset should be is ST_INPUT naming it). */
#ifndef CKPT_H5STORE_H
#define CKPT_H5STORE_H

#include <stdint.h>

#include "host_tensor.h"
#include "run_record.h"

#define H5STORE_SCHEMA_VERSION 1

struct h5store; /* an open file being written */

/* Creates "<path>.tmp" (truncating a stale one). ST_INPUT if the directory
 * is not writable. A write that fails marks the store: commit then refuses
 * (ST_INTERNAL) and deletes the temporary, so no partial file is published. */
int h5store_create(struct h5store **out, const char *path);
/* Strings up to this many bytes are stored fixed-length (the schema's
 * string type); longer ones variable-length, since HDF5's object header
 * holds at most 64 KiB of an attribute's value. */
#define H5STORE_FIXED_STRING_MAX 60000
/* String / integer / double attribute on a group ("/" for the root,
 * "/case", "/verdicts/reentrant"); missing groups are created. */
int h5store_attr_str(struct h5store *s, const char *group, const char *key, const char *value);
int h5store_attr_int(struct h5store *s, const char *group, const char *key, long long value);
int h5store_attr_double(struct h5store *s, const char *group, const char *key, double value);
/* Dataset at an absolute path ("/inputs/x"); intermediate groups created.
 * float32 -> IEEE F32LE, float16 -> an IEEE half type h5py reads as float16,
 * bfloat16 -> uint16 bit patterns; every dataset carries a "dtype" string
 * attribute with the harness dtype name. */
int h5store_write_tensor(struct h5store *s, const char *path, const struct host_tensor *t);
/* /runs/<r->name>/<each tensor path> (through h5store_write_run_tensor;
 * items marked stored are already in the file), and each "group.key" attribute on
 * /runs/<name>/<group> (split at the first dot; a key without a dot goes on
 * the run group). Whole numbers are stored as int64, others as float64. */
int h5store_write_run(struct h5store *s, const struct run_record *r);
/* A run's tensor at /runs/<run>/<path>. When `reference` names another
 * run (the run's baseline _0: run_record_reference) whose dataset at the
 * same path holds the same dtype, shape and bytes, a hard link to it;
 * otherwise a new dataset. Either way the dataset carries an int64 "crc32"
 * attribute, zlib's CRC-32 of its bytes. *linked (may be NULL) says which.
 * At most one tensor of the reference is read back to compare. */
int h5store_write_run_tensor(struct h5store *s, const char *run, const char *reference, const char *path,
                             const struct host_tensor *t, int *linked);
/* Makes everything written so far readable by the readers below, which
 * open the temporary (h5store_temp_path) while the store is open. */
int h5store_flush(struct h5store *s);
const char *h5store_temp_path(const struct h5store *s);
/* Closes and renames "<path>.tmp" to path. The handle is freed either way. */
int h5store_commit(struct h5store *s);
/* Closes and deletes the temporary file. */
void h5store_abort(struct h5store *s);

/* ---- reading --------------------------------------------------------- */
/* A report is opened once, as an sqlite3 or h5py file is: h5report_open
 * makes h5store_check_file's checks and keeps the file open read-only, and
 * the h5report_* readers below read everything through that one handle
 * (still readable if the file is renamed, replaced or unlinked meanwhile).
 * All bad-file failures are ST_INPUT with "FILE: /PATH: problem". The
 * h5store_* readers that take a path open the file, read and close it. */
struct h5report; /* an open report being read */

/* ST_INPUT naming the file when it is missing, not HDF5 or another schema
 * version; *out is NULL then. Only for a finished report (a writer in this
 * process must not be still writing it), or a flushed temporary. */
int h5report_open(struct h5report **out, const char *path);
/* Lets go of the handle (NULL: nothing). Runs that hold the report
 * (h5report_read_run_stored) keep the file open until they let go. */
void h5report_close(struct h5report *rep);
/* The path it was opened by, for messages. */
const char *h5report_path(const struct h5report *rep);
/* Names of the groups under /runs, in name order; *names is malloc'd, each
 * entry 64 bytes. ST_INPUT if /runs is missing. */
int h5report_list_runs(struct h5report *rep, char (**names)[64], int *count);
/* Names of the links directly under `group` (e.g. "/params_init"), in name
 * order, as one malloc'd buffer of NUL-terminated names, one after the
 * other; *count of them. ST_OK with none (*names NULL) when the group does
 * not exist. */
int h5report_list_names(struct h5report *rep, const char *group, char **names, int *count);
/* Loads /runs/<run>: every dataset under it, as paths relative to the run
 * group, sorted naturally (steps/ before other top-level groups; steps/2
 * before steps/10; within a step loss first, then grads in natural name
 * order), and the numeric attributes of its subgroups as "group.key" (of
 * the run group itself as "key"), loading at most *budget bytes of data
 * (what the datasets' shapes declare, counted once per link that reaches
 * them) and taking what it loads off *budget, so that a crafted file cannot
 * make a read take all memory; past it, ST_INPUT naming the file and the
 * dataset. On failure *out is left empty. */
#define H5STORE_READ_LIMIT (4ULL << 30)
int h5report_read_run_within(struct h5report *rep, const char *run, uint64_t *budget, struct run_record *out);
/* The same without loading any data: every dataset becomes a stored
 * tensor (run_record.h: dtype, shape, object identity, crc32) read later,
 * one at a time, by h5store_load_stored; out->source is the report's path
 * and out holds this handle's file (not a new open) until
 * h5store_let_go_source(out). What `judge` and `diff` read, so that no run
 * is ever whole in memory. */
int h5report_read_run_stored(struct h5report *rep, const char *run, struct run_record *out);
/* The bytes reading /runs/<run> (run NULL: every run) would load, from
 * the datasets' shapes alone, counted once per link that reaches them as
 * the read counts them: what a caller checks against its budget before
 * loading anything; *largest (may be NULL) gets the largest one dataset's. */
int h5report_claimed_bytes(struct h5report *rep, const char *run, uint64_t *bytes, uint64_t *largest);
/* A string attribute of a group into buf (ST_INPUT if missing). */
int h5report_read_attr_str(struct h5report *rep, const char *group, const char *key, char *buf, size_t len);
/* 1 if the report holds the group (or dataset) at path. */
int h5report_has_group(struct h5report *rep, const char *group);
/* Calls fn(ctx, key, value) for every scalar attribute of a group in name
 * order, as text (strings as stored, integers in decimal, floats with
 * %.17g); a non-OK return from fn stops the walk and is returned.
 * ST_INPUT if the group is missing. */
int h5report_foreach_attr(struct h5report *rep, const char *group,
                          int (*fn)(void *ctx, const char *key, const char *value), void *ctx);

/* The same by path, each opening the file once for its one read. */
/* Checks the file exists, is HDF5, and has schema_version 1 (ST_INPUT
 * otherwise, naming the file). */
int h5store_check_file(const char *path);
int h5store_list_runs(const char *path, char (**names)[64], int *count);
/* h5report_read_run_within with a budget of H5STORE_READ_LIMIT. */
int h5store_read_run(const char *path, const char *run, struct run_record *out);
/* h5report_read_run_stored, except that the run holds no file: each load
 * opens the report unless h5store_hold_source is called. */
int h5store_read_run_stored(const char *path, const char *run, struct run_record *out);
/* Keeps the report at r->source open read-only for r's loads until
 * h5store_let_go_source(r) (nothing to do for a run that already holds
 * one): a run read by path then opens its file once, not once per tensor.
 * Only for a finished report (a writer in this process must not be still
 * writing it). h5store_let_go_source lets go of whichever file r holds. */
int h5store_hold_source(struct run_record *r);
void h5store_let_go_source(struct run_record *r);
/* Loads a stored tensor of r from r->source, refusing one of more than
 * `limit` bytes (ST_INPUT naming the file and dataset) before allocating.
 * Like every load here it verifies the dataset's crc32 attribute when it
 * has one ("FILE: /runs/<run>/<path>: checksum mismatch (stored crc32 S,
 * data D): the file is corrupt", ST_INPUT), and notes the object in
 * r->checked. */
int h5store_load_stored(const struct run_record *r, const struct run_tensor *t, uint64_t limit,
                        struct host_tensor *out);
/* Verifies a stored tensor's checksum (nothing to do without one) reading
 * it a block at a time, holding no tensor; notes it in r->checked. */
int h5store_verify_stored(const struct run_record *r, const struct run_tensor *t);
/* Checks a run h5store_read_run returned against what every run of the
 * schema holds: at least one steps/<k> (k a decimal number), each with a
 * single-value loss. ST_INPUT naming the path inside the file otherwise;
 * `diff` makes these checks before comparing anything. */
int h5store_check_run(const char *path, const struct run_record *r);
/* By path, as h5report_read_attr_str, h5report_has_group (0 also when the
 * file does not open) and h5report_foreach_attr. */
int h5store_read_attr_str(const char *path, const char *group, const char *key, char *buf, size_t len);
int h5store_has_group(const char *path, const char *group);
int h5store_foreach_attr(const char *path, const char *group, int (*fn)(void *ctx, const char *key, const char *value),
                         void *ctx);
/* One dataset by absolute path. */
int h5store_read_tensor(const char *path, const char *dataset, struct host_tensor *out);

#endif
