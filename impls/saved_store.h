/* saved_store: the saved tensors of one non-reentrant checkpoint, by
 * handle — what its forward saved (metadata, the tensors it kept) and what
 * its recompute filled. nonreentrant.c owns it; the services of
 * services.h read and write it, which is all a planted bug may touch. */
#ifndef CKPT_SAVED_STORE_H
#define CKPT_SAVED_STORE_H

#include <stdint.h>

#include "tape.h"

struct impl_stats;

struct saved_meta {
    const char *op;
    int ndim;
    int64_t shape[TENSOR_MAX_DIMS];
    enum dtype dtype;
    int device;
    uint64_t fingerprint;
    int alive;                 /* its handle is still held by a node */
    /* selective: kept from forward (not recomputed), which call of its op
     * in this checkpoint saved it, as which of that node's saved tensors,
     * and the storage's version counter then. */
    int cached;
    int invocation, slot;
    int64_t version;
};

/* recomputed_for before the first recompute: no engine call has this id
 * (0 is "outside any backward", where an unpack recomputes too). */
#define NO_RECOMPUTE UINT64_MAX

struct saved_store {
    int n_handles;
    struct saved_meta *meta;
    /* Tensors kept from forward, by handle (NULL where none is): selective's
     * cached ones; a store service may keep others. */
    tensor **kept;
    tensor **recomputed;        /* filled by the recompute, emptied by unpacks */
    uint64_t recomputed_for;    /* engine call the recompute belongs to */
    int unpacks;                /* unpacks served so far */
    /* The k-th tensor a recompute saves fills handle k - slot_offset. The
     * handle counter service moves it; the reference leaves it 0. */
    int slot_offset;
    struct impl_stats *stats;   /* may be NULL */
};

/* The frame a store belongs to lives while anything holds it: a service
 * that keeps the store past backward retains it, and releases it once. */
void saved_store_retain(struct saved_store *store);
void saved_store_release(struct saved_store *store);

#endif
