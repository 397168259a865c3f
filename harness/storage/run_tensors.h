/* run_tensors: a run's tensor data at the moment it is needed. A tensor the
 * record holds in memory is lent as it is; a stored one (run_record.h) is
 * read from the run's report and freed on release, so whoever walks runs
 * this way holds only the tensors it is comparing, whatever the report's
 * size. Two stored tensors that are one HDF5 object are equal unread; the
 * checksum of every stored tensor is verified when it is read (h5store.h),
 * and run_tensors_verify_unread reads, once, each object a reader never
 * loaded (one a dozen hard links share), so no stored byte escapes it. */
#ifndef CKPT_RUN_TENSORS_H
#define CKPT_RUN_TENSORS_H

#include <stdint.h>

#include "checked_objects.h"
#include "run_record.h"

struct tensor_hold {
    struct host_tensor t; /* the data: lent (owned 0) or read for the holder (owned 1) */
    int owned;
};

/* Fills h with t's data. A stored tensor larger than r->tensor_limit bytes
 * (0: the reader's default, H5STORE_READ_LIMIT) is refused before it is
 * read: ST_INPUT naming the report and dataset. */
int run_tensor_acquire(const struct run_record *r, const struct run_tensor *t, struct tensor_hold *h);
void run_tensor_release(struct tensor_hold *h);
/* 1 when a (of run ra) and b (of run rb) are the same HDF5 object of one
 * report: the same bytes, known without reading them. */
int run_tensors_same_object(const struct run_record *ra, const struct run_tensor *a, const struct run_record *rb,
                            const struct run_tensor *b);
/* Verifies the checksum of each stored object of runs[0..n) that carries
 * one and is not yet in the runs' `checked` set (all share it), reading
 * it a block at a time (h5store_verify_stored). What a reader that skips
 * tensors two paths share calls at the end, so that a corrupt dataset
 * every run links to is still found. */
int run_tensors_verify_unread(const struct run_record *runs, int n);

/* 1 when two loaded tensors have the same dtype, shape and bytes: the
 * byte-wise test that comes before any element-wise work. */
int host_tensors_bitwise_equal(const struct host_tensor *a, const struct host_tensor *b);

#endif
