#include "run_record.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    snprintf(slot->path, sizeof slot->path, "%s", path);
    slot->t = *t;
    memset(t, 0, sizeof *t);
    return ST_OK;
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

void run_record_free(struct run_record *r)
{
    for (int i = 0; i < r->n; i++)
        host_tensor_free(&r->items[i].t);
    free(r->items);
    free(r->attrs);
    memset(r, 0, sizeof *r);
}
