/* run_record: everything one run recorded — its tensors under stable
 * relative paths ("steps/1/loss", "steps/1/grads/l0.weight",
 * "final_params/l0.weight", "saved/1/fingerprints") in recorded order, and its
 * numeric attributes ("memory.peak_bytes", "timing.forward_ms", ...).
 * Filled by the runner, written and read by h5store, walked by compare. */
#ifndef CKPT_RUN_RECORD_H
#define CKPT_RUN_RECORD_H

#include <stddef.h>
#include <stdint.h>

#include "host_tensor.h"
#include "text.h"

#define RUN_PATH_MAX 160
#define RUN_ATTR_KEY_MAX 64

/* A run's tensor. Its data is either in memory (t.data) or, `stored`, in
 * the report the record was read from or streamed into (run_record.source):
 * t then has its dtype and shape and no data, and run_tensor_acquire
 * (run_tensors.h) reads it when it is needed. */
struct run_tensor {
    char path[RUN_PATH_MAX];
    struct host_tensor t;
    int stored;
    /* Stored tensors: the HDF5 object behind the path (two paths reaching
     * one object hold the same bytes), and its crc32 attribute (-1: none). */
    unsigned char object[16];
    long long crc32;
};

struct run_attr {
    char key[RUN_ATTR_KEY_MAX]; /* "group.name": group is the HDF5 subgroup */
    double value;
};

/* How a run ended, beside what it recorded: "" (it completed), "error"
 * (it could not run: ERROR verdict) or "check_failed" (the checkpoint's own
 * check found recompute != forward: FAIL). A run's texts (message,
 * warning, noise cause, memory lists ...) are heap texts (text.h), read and
 * written at any length, owned by the record. Stored as string attributes
 * outcome, message and warning on the run group; so is `baselines`, the
 * family of baseline runs (<family>_0, <family>_1, ...) the run is judged
 * against, for producers whose plain runs differ from the harness's. */
#define RUN_OUTCOME_ERROR "error"
#define RUN_OUTCOME_CHECK_FAILED "check_failed"
#define RUN_ROLE_PLAIN "plain"
#define RUN_ROLE_REFERENCE "reference"
#define RUN_ROLE_PLANTED_BUG "planted_bug"

struct run_record {
    char name[64];              /* "baseline_0", "reentrant", ... */
    char outcome[16];           /* "", RUN_OUTCOME_ERROR, RUN_OUTCOME_CHECK_FAILED */
    struct text message; /* why, for an outcome */
    struct text warning; /* a warning the run raised ("" if none) */
    char baselines[64];         /* the baseline family it is judged against ("": "baseline") */
    /* A twin (a distributed run's <run>_vs_single, a compiled run's
     * <run>_vs_eager): the run whose tensors it is, judged again against a
     * mixed family; its verdict counts only while that run's own is PASS
     * or NOISE. "" for any other run. */
    char twin_of[64];
    /* What a NOISE verdict's spread stands for, where it is not the
     * kernels' run-to-run noise (a twin's family: what distribution or
     * compiling does to the numbers); "" says kernel non-determinism. */
    struct text noise_cause;
    /* With check_failed from a non-reentrant check: the saved tensors' ops
     * in forward and in recompute side by side, up to the first difference
     * (several lines; "" otherwise). */
    struct text op_log;
    /* A user's run with a memory statement (the Python frontend's memory
     * map, docs/schema.md): the statement's basis, the run's tensors the
     * statement says it should not hold, and the recomputed tensors it
     * kept after backward ("" when none; names for the judge's reasons). */
    struct text memory_statement;
    struct text memory_still_held;
    struct text memory_kept;
    /* What the producer says the run is, so that a judge with no knowledge
     * of the producer's code (the torch-free judge) decides as the producer
     * would: RUN_ROLE_PLAIN (the harness's `none`), RUN_ROLE_REFERENCE (a
     * reference checkpoint), RUN_ROLE_PLANTED_BUG (a mutation that must be
     * caught), or "" (not said: a checkpoint that claims to be right). */
    char role[16];
    /* A planted bug whose own rule says it cannot show in this case: why
     * ("dropout = 0: nothing random to replay"); "" otherwise. */
    struct text not_observable;
    /* A user's run that changed the model's classes (the Python frontend's
     * class_patches: "run X patched Block.forward on the class ..."), said
     * first in its reason whatever its verdict; "" otherwise. */
    struct text class_patches;
    struct text memory_extra;    /* a user's run: tensors its baseline does not hold (docs/memory.md) */
    struct text memory_declared; /* ... what its selective policy declared saved */
    struct text memory_state;    /* ... state: born before the step, or kept from step to step */
    int n, cap;
    struct run_tensor *items;
    char *source; /* the report stored tensors are read from (malloc'd), or NULL */
    /* That report's file identity (st_dev, st_ino; 0 when unknown): two
     * spellings of one file's path are one report. */
    unsigned long long source_dev, source_ino;
    /* The objects whose checksums have been verified, shared by the runs
     * of one reader (run_tensors.h), or NULL: every load that verifies a
     * checksum adds its object. Not owned. */
    struct checked_objects *checked;
    /* An HDF5 file id open read-only on source: the report handle it was
     * read through (h5report_read_run_stored) or one h5store_hold_source
     * opened, held until h5store_let_go_source; or 0: each load then opens
     * the report itself. run_record_free does not close it. */
    int64_t source_file;
    uint64_t tensor_limit; /* the most bytes one stored tensor may load (0: H5STORE_READ_LIMIT) */
    int n_attrs, cap_attrs;
    struct run_attr *attrs;
};

void run_record_init(struct run_record *r, const char *name);
/* Takes ownership of t's buffer (t is zeroed). */
int run_record_add(struct run_record *r, const char *path, struct host_tensor *t);
/* A tensor kept in the report at r->source: t's dtype and shape, no data. */
int run_record_add_stored(struct run_record *r, const char *path, const struct host_tensor *shape_of,
                          const unsigned char object[16], long long crc32);
int run_record_set_source(struct run_record *r, const char *path);
/* The run whose datasets this run's identical tensors link to: "<baselines>_0",
 * or "baseline_0" when the record names no family. */
void run_record_reference(const struct run_record *r, char *buf, size_t len);
int run_record_set_attr(struct run_record *r, const char *key, double value);
/* NULL / NAN when absent. */
const struct run_tensor *run_record_find(const struct run_record *r, const char *path);
double run_record_attr(const struct run_record *r, const char *key);
/* Orders the tensors as a reader of the file meets them: steps/ first
 * (steps/2 before steps/10; within a step the loss, then grads/ in natural
 * name order, then the rest), then other top-level groups, natural order
 * throughout. The "first divergence" of a run is first in this order. */
void run_record_sort(struct run_record *r);
void run_record_free(struct run_record *r);

#endif
