#define _POSIX_C_SOURCE 200809L

#include "run_record.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "error.h"

void run_record_init(struct run_record *r, const char *name)
{
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", name);
}

int run_record_add(struct run_record *r, const char *path, struct host_tensor *t)
{
    if (strlen(path) >= RUN_PATH_MAX)
        return error_set(ST_INTERNAL, "record path too long: %s", path);
    if (r->n == r->cap) {
        int cap = r->cap ? r->cap * 2 : 16;
        struct run_tensor *items = realloc(r->items, (size_t)cap * sizeof *items);
        if (!items)
            return error_set(ST_RUN, "out of memory growing run record %s", r->name);
        r->items = items;
        r->cap = cap;
    }
    struct run_tensor *slot = &r->items[r->n++];
    memset(slot, 0, sizeof *slot);
    snprintf(slot->path, sizeof slot->path, "%s", path);
    slot->t = *t;
    slot->crc32 = -1;
    memset(t, 0, sizeof *t);
    return ST_OK;
}

int run_record_add_stored(struct run_record *r, const char *path, const struct host_tensor *shape_of,
                          const unsigned char object[16], long long crc32)
{
    struct host_tensor t = *shape_of;
    t.data = NULL;
    int st = run_record_add(r, path, &t);
    if (st)
        return st;
    struct run_tensor *slot = &r->items[r->n - 1];
    slot->stored = 1;
    memcpy(slot->object, object, sizeof slot->object);
    slot->crc32 = crc32;
    return ST_OK;
}

int run_record_set_source(struct run_record *r, const char *path)
{
    char *copy = strdup(path);
    if (!copy)
        return error_set(ST_RUN, "out of memory naming the report of run %s", r->name);
    free(r->source);
    r->source = copy;
    struct stat sb;
    r->source_dev = r->source_ino = 0;
    if (stat(path, &sb) == 0) {
        r->source_dev = (unsigned long long)sb.st_dev;
        r->source_ino = (unsigned long long)sb.st_ino;
    }
    return ST_OK;
}

void run_record_reference(const struct run_record *r, char *buf, size_t len)
{
    snprintf(buf, len, "%s_0", r->baselines[0] ? r->baselines : "baseline");
}

int run_record_set_attr(struct run_record *r, const char *key, double value)
{
    for (int i = 0; i < r->n_attrs; i++) {
        if (strcmp(r->attrs[i].key, key) == 0) {
            r->attrs[i].value = value;
            return ST_OK;
        }
    }
    if (strlen(key) >= RUN_ATTR_KEY_MAX)
        return error_set(ST_INTERNAL, "attribute key too long: %s", key);
    if (r->n_attrs == r->cap_attrs) {
        int cap = r->cap_attrs ? r->cap_attrs * 2 : 16;
        struct run_attr *attrs = realloc(r->attrs, (size_t)cap * sizeof *attrs);
        if (!attrs)
            return error_set(ST_RUN, "out of memory growing run attributes of %s", r->name);
        r->attrs = attrs;
        r->cap_attrs = cap;
    }
    snprintf(r->attrs[r->n_attrs].key, RUN_ATTR_KEY_MAX, "%s", key);
    r->attrs[r->n_attrs++].value = value;
    return ST_OK;
}

const struct run_tensor *run_record_find(const struct run_record *r, const char *path)
{
    for (int i = 0; i < r->n; i++)
        if (strcmp(r->items[i].path, path) == 0)
            return &r->items[i];
    return NULL;
}

double run_record_attr(const struct run_record *r, const char *key)
{
    for (int i = 0; i < r->n_attrs; i++)
        if (strcmp(r->attrs[i].key, key) == 0)
            return r->attrs[i].value;
    return NAN;
}

/* Natural order of two path components: digit runs compare as numbers
 * (l2 < l10), everything else bytewise. Equal numbers with different
 * leading zeros order by zero count so the order stays total. */
static int natural_cmp(const char *a, size_t na, const char *b, size_t nb)
{
    size_t i = 0, j = 0;
    while (i < na && j < nb) {
        if (isdigit((unsigned char)a[i]) && isdigit((unsigned char)b[j])) {
            size_t zi = i, zj = j;
            while (zi < na && a[zi] == '0')
                zi++;
            while (zj < nb && b[zj] == '0')
                zj++;
            size_t ei = zi, ej = zj;
            while (ei < na && isdigit((unsigned char)a[ei]))
                ei++;
            while (ej < nb && isdigit((unsigned char)b[ej]))
                ej++;
            if (ei - zi != ej - zj)
                return ei - zi < ej - zj ? -1 : 1;
            int c = memcmp(a + zi, b + zj, ei - zi);
            if (c)
                return c < 0 ? -1 : 1;
            if (zi - i != zj - j)
                return zi - i < zj - j ? -1 : 1;
            i = ei;
            j = ej;
        } else {
            unsigned char ca = (unsigned char)a[i], cb = (unsigned char)b[j];
            if (ca != cb)
                return ca < cb ? -1 : 1;
            i++;
            j++;
        }
    }
    return (na - i) < (nb - j) ? -1 : (na - i) > (nb - j);
}

static int span_is(const char *s, size_t n, const char *word)
{
    return strlen(word) == n && memcmp(s, word, n) == 0;
}

static int span_is_number(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isdigit((unsigned char)s[i]))
            return 0;
    return n > 0;
}

struct span {
    const char *s;
    size_t n;
};

/* Rank before name order. At the top of a run "steps" comes first: it is
 * what happened first, and compare reports the first difference it meets,
 * which should be a step's gradient rather than a final parameter. Inside
 * steps/<k>: the loss, then grads/..., then anything else. */
static int component_rank(int level, struct span up2, struct span up1, struct span c)
{
    if (level == 0)
        return span_is(c.s, c.n, "steps") ? 0 : 1;
    if (level >= 2 && span_is(up2.s, up2.n, "steps") && span_is_number(up1.s, up1.n))
        return span_is(c.s, c.n, "loss") ? 0 : span_is(c.s, c.n, "grads") ? 1 : 2;
    return 0;
}

static int path_cmp(const char *a, const char *b)
{
    struct span up2 = {"", 0}, up1 = {"", 0};
    for (int level = 0;; level++) {
        struct span ca = {a, strcspn(a, "/")}, cb = {b, strcspn(b, "/")};
        int ra = component_rank(level, up2, up1, ca), rb = component_rank(level, up2, up1, cb);
        if (ra != rb)
            return ra < rb ? -1 : 1;
        int c = natural_cmp(ca.s, ca.n, cb.s, cb.n);
        if (c)
            return c;
        a += ca.n;
        b += cb.n;
        if (!*a || !*b) /* a group sorts before what it holds */
            return *a ? 1 : *b ? -1 : 0;
        a++;
        b++;
        up2 = up1;
        up1 = ca;
    }
}

static int run_tensor_cmp(const void *x, const void *y)
{
    return path_cmp(((const struct run_tensor *)x)->path, ((const struct run_tensor *)y)->path);
}

void run_record_sort(struct run_record *r)
{
    if (r->n > 1) /* a run with no tensors has no items array: qsort(NULL) is undefined */
        qsort(r->items, (size_t)r->n, sizeof *r->items, run_tensor_cmp);
}

void run_record_free(struct run_record *r)
{
    for (int i = 0; i < r->n; i++)
        host_tensor_free(&r->items[i].t);
    free(r->items);
    free(r->attrs);
    free(r->source);
    struct text *texts[] = {&r->message, &r->warning, &r->noise_cause, &r->op_log, &r->memory_statement,
                            &r->memory_still_held, &r->memory_kept, &r->not_observable, &r->class_patches,
                            &r->memory_extra, &r->memory_declared, &r->memory_state};
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++)
        text_free(texts[i]);
    memset(r, 0, sizeof *r);
}
