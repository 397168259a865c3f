/* run_tensors: see run_tensors.h. */
#include "run_tensors.h"

#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "h5store.h"

int run_tensor_acquire(const struct run_record *r, const struct run_tensor *t, struct tensor_hold *h)
{
    memset(h, 0, sizeof *h);
    if (!t->stored) {
        h->t = t->t;
        return ST_OK;
    }
    int st = h5store_load_stored(r, t, r->tensor_limit ? r->tensor_limit : H5STORE_READ_LIMIT, &h->t);
    if (st == ST_OK)
        h->owned = 1;
    return st;
}

void run_tensor_release(struct tensor_hold *h)
{
    if (h->owned)
        host_tensor_free(&h->t);
    memset(h, 0, sizeof *h);
}

/* One report: the same file (by identity when both are known), else the
 * same path. */
static int same_source(const struct run_record *ra, const struct run_record *rb)
{
    if (!ra->source || !rb->source)
        return 0;
    if (ra->source_ino && rb->source_ino)
        return ra->source_dev == rb->source_dev && ra->source_ino == rb->source_ino;
    return strcmp(ra->source, rb->source) == 0;
}

int run_tensors_same_object(const struct run_record *ra, const struct run_tensor *a, const struct run_record *rb,
                            const struct run_tensor *b)
{
    static const unsigned char none[16];
    return a->stored && b->stored && same_source(ra, rb) && memcmp(a->object, none, sizeof none) != 0 &&
           memcmp(a->object, b->object, sizeof a->object) == 0;
}

int run_tensors_verify_unread(const struct run_record *runs, int n)
{
    for (int i = 0; i < n; i++)
        for (int k = 0; k < runs[i].n; k++) {
            const struct run_tensor *t = &runs[i].items[k];
            if (!t->stored || t->crc32 < 0 || (runs[i].checked && checked_objects_has(runs[i].checked, &runs[i], t)))
                continue;
            int st = h5store_verify_stored(&runs[i], t);
            if (st)
                return st;
        }
    return ST_OK;
}

int host_tensors_bitwise_equal(const struct host_tensor *a, const struct host_tensor *b)
{
    if (a->dtype != b->dtype || a->ndim != b->ndim || a->numel != b->numel)
        return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i])
            return 0;
    size_t bytes = host_tensor_bytes(a);
    return bytes == 0 || (a->data && b->data && memcmp(a->data, b->data, bytes) == 0);
}
