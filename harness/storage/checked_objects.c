/* checked_objects: see checked_objects.h. An open-addressing set of
 * 32-byte keys (the report's file identity, then the object's). */
#include "checked_objects.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

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
    size_t slot = 0; /* set_find always sets it; -O3 cannot see that through the empty set */
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

