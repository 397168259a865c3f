/* h5store_read_attrs: attributes of a report's groups read as text: one
 * string attribute by name, or every scalar attribute of a group walked in
 * name order (strings as stored, integers in decimal, floats with %.17g). */
#define _POSIX_C_SOURCE 200809L

#include "h5store.h"

#include <stdio.h>
#include <string.h>

#include <hdf5.h>

#include "error.h"
#include "h5store_internal.h"

int h5report_read_attr_str(struct h5report *rep, const char *group, const char *key, char *buf, size_t len)
{
    h5store_silence_hdf5();
    if (buf && len)
        buf[0] = '\0';
    const char *path = rep->path;
    hid_t f = rep->file;
    int rc = ST_OK;
    hid_t obj = H5I_INVALID_HID, a = H5I_INVALID_HID;
    htri_t has = 0;
    if (!group || !key || !buf || !len)
        rc = error_set(ST_INTERNAL, "%s: read_attr_str needs a group, a key and a buffer", path);
    else if (!h5store_path_exists(f, group) || (obj = H5Oopen(f, group, H5P_DEFAULT)) < 0)
        rc = error_set(ST_INPUT, "%s: %s: group missing", path, group);
    else if ((has = H5Aexists(obj, key)) <= 0)
        rc = error_set(ST_INPUT, "%s: %s: attribute %s missing", path, group, key);
    else if ((a = H5Aopen(obj, key, H5P_DEFAULT)) < 0)
        rc = h5store_fail(ST_INPUT, path, group, "unreadable attribute %s", key);
    if (rc == ST_OK) {
        int got = h5store_attr_string(a, buf, len);
        if (got == -1)
            rc = h5store_fail(ST_INPUT, path, group, "unreadable attribute %s", key);
        else if (got == -2)
            rc = error_set(ST_INPUT, "%s: %s: attribute %s longer than %zu bytes", path, group, key,
                           len - 1);
        else if (got == 0)
            rc = error_set(ST_INPUT, "%s: %s: attribute %s is not a string", path, group, key);
        if (rc != ST_OK)
            buf[0] = '\0';
    }
    if (a >= 0)
        H5Aclose(a);
    if (obj >= 0)
        H5Oclose(obj);
    return rc;
}

int h5store_read_attr_str(const char *path, const char *group, const char *key, char *buf, size_t len)
{
    if (buf && len)
        buf[0] = '\0';
    struct h5report *rep;
    int rc = h5report_open(&rep, path);
    if (rc == ST_OK)
        rc = h5report_read_attr_str(rep, group, key, buf, len);
    h5report_close(rep);
    return rc;
}

struct attr_walk {
    const char *file, *group;
    int (*fn)(void *ctx, const char *key, const char *value);
    void *ctx;
    int status;
};

/* One scalar attribute as text: strings as stored, integers in decimal,
 * floats with every digit needed to read them back. Others are skipped. */
static herr_t walk_attr(hid_t loc, const char *name, const H5A_info_t *info, void *data)
{
    (void)info;
    struct attr_walk *w = data;
    char value[8192];
    struct h5store_open_attr o = h5store_attr_open(loc, name);
    hid_t a = o.a, t = o.type, sp = o.space;
    int have = 0;
    if (t < 0 || sp < 0) {
        w->status = h5store_fail(ST_INPUT, w->file, w->group, "unreadable attribute %s", name);
    } else if (H5Sget_simple_extent_npoints(sp) == 1) {
        H5T_class_t cls = H5Tget_class(t);
        if (cls == H5T_STRING) {
            int got = h5store_attr_string(a, value, sizeof value);
            if (got == -1)
                w->status = h5store_fail(ST_INPUT, w->file, w->group, "unreadable attribute %s", name);
            else if (got == -2)
                w->status = error_set(ST_INPUT, "%s: %s: attribute %s longer than %zu bytes", w->file, w->group,
                                      name, sizeof value - 1);
            have = got == 1;
        } else if (cls == H5T_INTEGER) {
            long long i;
            if (H5Aread(a, H5T_NATIVE_LLONG, &i) < 0)
                w->status = h5store_fail(ST_INPUT, w->file, w->group, "unreadable attribute %s", name);
            else
                have = snprintf(value, sizeof value, "%lld", i) > 0;
        } else if (cls == H5T_FLOAT) {
            double d;
            if (H5Aread(a, H5T_NATIVE_DOUBLE, &d) < 0)
                w->status = h5store_fail(ST_INPUT, w->file, w->group, "unreadable attribute %s", name);
            else
                have = snprintf(value, sizeof value, "%.17g", d) > 0;
        }
    }
    if (have && w->status == ST_OK)
        w->status = w->fn(w->ctx, name, value);
    h5store_attr_close(&o);
    return w->status == ST_OK ? 0 : -1;
}

int h5report_foreach_attr(struct h5report *rep, const char *group,
                          int (*fn)(void *ctx, const char *key, const char *value), void *ctx)
{
    h5store_silence_hdf5();
    const char *path = rep->path;
    int rc = ST_OK;
    struct attr_walk w = {path, group, fn, ctx, ST_OK};
    hid_t obj = H5I_INVALID_HID;
    if (!group || !h5store_path_exists(rep->file, group) || (obj = H5Oopen(rep->file, group, H5P_DEFAULT)) < 0)
        rc = error_set(ST_INPUT, "%s: %s: group missing", path, group ? group : "");
    else if (H5Aiterate2(obj, H5_INDEX_NAME, H5_ITER_INC, NULL, walk_attr, &w) < 0)
        rc = w.status != ST_OK ? w.status : h5store_fail(ST_INPUT, path, group, "cannot list attributes");
    if (obj >= 0)
        H5Oclose(obj);
    return rc;
}

int h5store_foreach_attr(const char *path, const char *group, int (*fn)(void *ctx, const char *key, const char *value),
                         void *ctx)
{
    struct h5report *rep;
    int rc = h5report_open(&rep, path);
    if (rc == ST_OK)
        rc = h5report_foreach_attr(rep, group, fn, ctx);
    h5report_close(rep);
    return rc;
}
