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

/* ---- verified objects: an open-addressing set of 32-byte keys ---------- */

static void object_key(const struct run_record *r, const struct run_tensor *t, unsigned char key[32])
{
    unsigned long long dev = r->source_dev, ino = r->source_ino;
    memcpy(key, &dev, 8);
    memcpy(key + 8, &ino, 8);
    memcpy(key + 16, t->object, 16);
}

static size_t key_slot(const unsigned char key[32], size_t cap)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (int i = 0; i < 32; i++)
        h = (h ^ key[i]) * 1099511628211ULL;
    return (size_t)h & (cap - 1);
}

static int key_empty(const unsigned char key[32])
{
    static const unsigned char zero[32];
    return memcmp(key, zero, 32) == 0;
}

static int set_find(const struct checked_objects *s, const unsigned char key[32], size_t *slot)
{
    if (!s->cap)
        return 0;
    size_t i = key_slot(key, s->cap);
    while (!key_empty(s->keys[i])) {
        if (memcmp(s->keys[i], key, 32) == 0) {
            *slot = i;
            return 1;
        }
        i = (i + 1) & (s->cap - 1);
    }
    *slot = i;
    return 0;
}

int checked_objects_has(const struct checked_objects *s, const struct run_record *r, const struct run_tensor *t)
{
    unsigned char key[32];
    size_t slot;
    object_key(r, t, key);
    return !key_empty(key) && set_find(s, key, &slot);
}

int checked_objects_add(struct checked_objects *s, const struct run_record *r, const struct run_tensor *t)
{
    unsigned char key[32];
    size_t slot;
    object_key(r, t, key);
    if (key_empty(key) || set_find(s, key, &slot))
        return ST_OK;
    if (2 * (s->n + 1) > s->cap) { /* at most half full */
        size_t cap = s->cap ? 2 * s->cap : 256;
        unsigned char(*keys)[32] = calloc(cap, sizeof *keys);
        if (!keys)
            return error_set(ST_RUN, "out of memory noting verified checksums");
        struct checked_objects grown = {0, cap, keys};
        for (size_t i = 0; i < s->cap; i++)
            if (!key_empty(s->keys[i]) && !set_find(&grown, s->keys[i], &slot))
                memcpy(grown.keys[slot], s->keys[i], 32);
        grown.n = s->n;
        free(s->keys);
        *s = grown;
        set_find(s, key, &slot);
    }
    memcpy(s->keys[slot], key, 32);
    s->n++;
    return ST_OK;
}

void checked_objects_free(struct checked_objects *s)
{
    free(s->keys);
    memset(s, 0, sizeof *s);
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
