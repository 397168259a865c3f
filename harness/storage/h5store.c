/* h5store: see h5store.h for the contract and docs/schema.md for the layout.
 *
 * Error handling. HDF5 prints its error stack to stderr unless told not to;
 * every entry point below calls silence_hdf5() first (see there), and every
 * failure becomes one error_set() line "FILE: /PATH/IN/FILE: what went
 * wrong (HDF5's innermost reason)". The reason is read from HDF5's error
 * stack right after the failing call, before any cleanup call clears it,
 * which is why the code sets its message before closing handles.
 *
 * No global mutable state: everything a writer needs lives in struct
 * h5store, and the readers open, read and close within one call. */
#define _POSIX_C_SOURCE 200809L

#include "h5store.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hdf5.h>

#include "error.h"
#include "temp_file.h"

struct h5store {
    char *path;     /* the final name, as the caller gave it: used in messages */
    char *tmp;      /* "<path>.XXXXXX.tmp" (temp_file.h): where the image goes before the rename */
    int tmp_fd;     /* open on tmp until commit writes the image */
    hid_t file;     /* an in-memory file (core driver, no backing store) */
    hid_t gcpl;     /* groups: link creation order tracked + indexed, no timestamps */
    hid_t dcpl;     /* datasets: no timestamps */
    hid_t f16_file; /* IEEE half, little-endian: what float16 datasets are stored as */
    hid_t f16_mem;  /* the same layout in native byte order: what host memory holds */
    int failed;     /* a write failed: commit refuses, so no partial report is published */
};

/* ---- shared helpers ------------------------------------------------- */

/* HDF5 prints its error stack to stderr by default. We switch that off at
 * the top of every entry point rather than once behind a global flag: the
 * call is cheap, it needs no mutable global, and in a thread-safe HDF5
 * build the setting is per thread, so a once-flag would leave other
 * threads printing. The error stack itself is still recorded; h5_reason()
 * reads it. */
static void silence_hdf5(void) { H5Eset_auto2(H5E_DEFAULT, NULL, NULL); }

struct reason_buf {
    char *buf;
    size_t len;
};

static herr_t reason_walk(unsigned n, const H5E_error2_t *err, void *data)
{
    struct reason_buf *r = data;
    if (n != 0)
        return 0;
    /* The innermost entry is the specific one ("truncated file: eof = ..."),
     * the outer ones only say which API call failed. */
    if (err->desc && err->desc[0])
        snprintf(r->buf, r->len, "%s", err->desc);
    else
        H5Eget_msg(err->min_num, NULL, r->buf, r->len);
    return 0;
}

/* HDF5's innermost error description for the call that just failed, or "". */
static const char *h5_reason(char *buf, size_t len)
{
    struct reason_buf r = {buf, len};
    buf[0] = '\0';
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, reason_walk, &r);
    /* Keep the message on one line whatever HDF5 wrote. */
    for (char *p = buf; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    return buf;
}

/* error_set() for a failed HDF5 call: "file: where: what (reason)". `where`
 * may be NULL for file-level failures. Call it before closing anything. */
static int fail_h5(int code, const char *file, const char *where, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail_h5(int code, const char *file, const char *where, const char *fmt, ...)
{
    char what[512], reason[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    h5_reason(reason, sizeof reason);
    return error_set(code, "%s: %s%s%s%s%s%s", file, where ? where : "", where ? ": " : "", what,
                     reason[0] ? " (HDF5: " : "", reason, reason[0] ? ")" : "");
}

/* IEEE binary16 exactly as h5py defines its float16 (IEEE_F16LE in h5t.pyx),
 * so h5py maps it to numpy float16. Built from a 32-bit float: the fields
 * are moved into the low 16 bits first, because H5Tset_size refuses to
 * shrink a float through its sign/exponent/mantissa fields; then the size
 * (precision follows it down to 16) and the exponent bias. */
static hid_t make_float_type(hid_t base, size_t epos, size_t esize, size_t msize, size_t ebias)
{
    hid_t t = H5Tcopy(base);
    if (t < 0)
        return H5I_INVALID_HID;
    if (H5Tset_fields(t, 15, epos, esize, 0, msize) < 0 || H5Tset_size(t, 2) < 0 ||
        H5Tset_ebias(t, ebias) < 0) {
        H5Tclose(t);
        return H5I_INVALID_HID;
    }
    return t;
}

static hid_t make_half(hid_t base) { return make_float_type(base, 10, 5, 10, 15); }
/* bfloat16 as a 2-byte HDF5 float. We never write it (the schema stores
 * bfloat16 as uint16 bit patterns) but read files that chose it. */
static hid_t make_bf16_float(hid_t base) { return make_float_type(base, 7, 8, 7, 127); }

/* A fixed-length, NUL-terminated UTF-8 string of len characters: h5dump
 * prints it as "text", h5py reads it as bytes. */
static hid_t make_str_type(size_t len)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    if (t < 0)
        return H5I_INVALID_HID;
    if (H5Tset_size(t, len + 1) < 0 || H5Tset_strpad(t, H5T_STR_NULLTERM) < 0 ||
        H5Tset_cset(t, H5T_CSET_UTF8) < 0) {
        H5Tclose(t);
        return H5I_INVALID_HID;
    }
    return t;
}

/* ---- writing -------------------------------------------------------- */

static void close_id(hid_t *id, herr_t (*close)(hid_t))
{
    if (*id >= 0)
        close(*id);
    *id = H5I_INVALID_HID;
}

/* Closes every handle; returns H5Fclose's result (the one that matters:
 * it is where buffered metadata reaches the disk). */
static herr_t store_close(struct h5store *s)
{
    close_id(&s->gcpl, H5Pclose);
    close_id(&s->dcpl, H5Pclose);
    close_id(&s->f16_file, H5Tclose);
    close_id(&s->f16_mem, H5Tclose);
    herr_t rc = 0;
    if (s->file >= 0)
        rc = H5Fclose(s->file);
    s->file = H5I_INVALID_HID;
    return rc;
}

static void store_free(struct h5store *s)
{
    if (s->tmp_fd >= 0)
        close(s->tmp_fd);
    free(s->path);
    free(s->tmp);
    free(s);
}

/* The file is built in memory (HDF5's core driver without a backing store)
 * and written to its temporary in one piece at commit. HDF5 never touches
 * the disk itself, because it cannot recover from a write that fails there:
 * after a failed flush in H5Fclose (a full disk, a file size limit) the file
 * stays half-closed, and HDF5's own cleanup at exit crashes on it. */
int h5store_create(struct h5store **out, const char *path)
{
    silence_hdf5();
    *out = NULL;
    if (!path || !path[0])
        return error_set(ST_INPUT, "h5store: empty output path");

    struct h5store *s = calloc(1, sizeof *s);
    if (!s)
        return error_set(ST_INTERNAL, "%s: out of memory", path);
    s->file = s->gcpl = s->dcpl = s->f16_file = s->f16_mem = H5I_INVALID_HID;
    s->tmp_fd = -1;
    s->path = strdup(path);
    if (!s->path) {
        store_free(s);
        return error_set(ST_INTERNAL, "%s: out of memory", path);
    }
    /* The temporary is created now, not at commit: an unusable directory
     * is found before the case's work is written, and its errno says why. */
    int rc = temp_file_create(path, &s->tmp, &s->tmp_fd);
    if (rc != ST_OK) {
        store_free(s);
        return rc;
    }

    hid_t fcpl = H5Pcreate(H5P_FILE_CREATE);
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    s->gcpl = H5Pcreate(H5P_GROUP_CREATE);
    s->dcpl = H5Pcreate(H5P_DATASET_CREATE);
    const unsigned order = H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED;
    /* Creation order is tracked so the file lists things in the order they
     * were written (h5dump --sort_by=creation_order, h5py track_order);
     * object timestamps are off so the same run writes the same bytes. The
     * root group takes its settings from the file creation list. */
    if (fcpl < 0 || fapl < 0 || s->gcpl < 0 || s->dcpl < 0 ||
        H5Pset_link_creation_order(fcpl, order) < 0 || H5Pset_attr_creation_order(fcpl, order) < 0 ||
        H5Pset_obj_track_times(fcpl, 0) < 0 || H5Pset_link_creation_order(s->gcpl, order) < 0 ||
        H5Pset_attr_creation_order(s->gcpl, order) < 0 || H5Pset_obj_track_times(s->gcpl, 0) < 0 ||
        H5Pset_obj_track_times(s->dcpl, 0) < 0 || H5Pset_fapl_core(fapl, 1 << 20, 0) < 0 ||
        H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG) < 0) {
        rc = fail_h5(ST_INTERNAL, path, NULL, "cannot set up HDF5 property lists");
    } else if ((s->f16_file = make_half(H5T_IEEE_F32LE)) < 0 ||
               (s->f16_mem = make_half(H5T_NATIVE_FLOAT)) < 0) {
        rc = fail_h5(ST_INTERNAL, path, NULL, "cannot build the float16 HDF5 type");
    } else if ((s->file = H5Fcreate(s->tmp, H5F_ACC_TRUNC, fcpl, fapl)) < 0) {
        rc = fail_h5(ST_INTERNAL, path, NULL, "cannot create HDF5 file %s", s->tmp);
    }
    if (fcpl >= 0)
        H5Pclose(fcpl);
    if (fapl >= 0)
        H5Pclose(fapl);
    if (rc != ST_OK) {
        store_close(s);
        unlink(s->tmp);
        store_free(s);
        return rc;
    }
    *out = s;
    return ST_OK;
}

/* Opens the group at an absolute path, creating missing components with
 * s->gcpl (H5Pset_create_intermediate_group would create them without
 * creation-order tracking). */
static int group_at(struct h5store *s, const char *group, hid_t *out)
{
    *out = H5I_INVALID_HID;
    char *copy = malloc(strlen(group) + 1);
    if (!copy)
        return error_set(ST_INTERNAL, "%s: out of memory", s->path);
    strcpy(copy, group);
    int rc = ST_OK;
    hid_t cur = H5Gopen2(s->file, "/", H5P_DEFAULT);
    if (cur < 0)
        rc = fail_h5(ST_INTERNAL, s->path, "/", "cannot open root group");
    char *save = NULL;
    for (char *c = strtok_r(copy, "/", &save); c && rc == ST_OK; c = strtok_r(NULL, "/", &save)) {
        htri_t exists = H5Lexists(cur, c, H5P_DEFAULT);
        hid_t next = H5I_INVALID_HID;
        if (exists > 0) {
            next = H5Gopen2(cur, c, H5P_DEFAULT);
            if (next < 0)
                rc = fail_h5(ST_INTERNAL, s->path, group, "'%s' exists and is not a group", c);
        } else {
            next = H5Gcreate2(cur, c, H5P_DEFAULT, s->gcpl, H5P_DEFAULT);
            if (next < 0)
                rc = fail_h5(ST_INTERNAL, s->path, group, "cannot create group '%s'", c);
        }
        H5Gclose(cur);
        cur = next;
    }
    free(copy);
    if (rc != ST_OK) {
        if (cur >= 0)
            H5Gclose(cur);
        return rc;
    }
    *out = cur;
    return ST_OK;
}

/* A scalar attribute on obj, replacing one of the same name (so a runner
 * may update a value). Returns <0 on HDF5 failure, message not yet set. */
static herr_t write_attr(hid_t obj, const char *key, hid_t ftype, hid_t mtype, const void *value)
{
    if (H5Aexists(obj, key) > 0 && H5Adelete(obj, key) < 0)
        return -1;
    hid_t space = H5Screate(H5S_SCALAR);
    if (space < 0)
        return -1;
    hid_t a = H5Acreate2(obj, key, ftype, space, H5P_DEFAULT, H5P_DEFAULT);
    herr_t rc = a < 0 ? -1 : H5Awrite(a, mtype, value);
    /* Close errors would clear the stack of a write error; the write's
     * result is the one reported. */
    if (a >= 0)
        H5Aclose(a);
    H5Sclose(space);
    return rc;
}

static herr_t write_str_attr(hid_t obj, const char *key, const char *value)
{
    hid_t t = make_str_type(strlen(value));
    if (t < 0)
        return -1;
    herr_t rc = write_attr(obj, key, t, t, value);
    H5Tclose(t);
    return rc;
}

static int group_attr(struct h5store *s, const char *group, const char *key, hid_t ftype,
                      hid_t mtype, const void *value, const char *str_value)
{
    silence_hdf5();
    if (!s)
        return error_set(ST_INTERNAL, "h5store: attribute written to a closed store");
    if (!group || !group[0] || !key || !key[0]) {
        s->failed = 1;
        return error_set(ST_INTERNAL, "%s: attribute needs a group and a key", s->path);
    }
    hid_t g;
    int rc = group_at(s, group, &g);
    if (rc == ST_OK) {
        herr_t w = str_value ? write_str_attr(g, key, str_value)
                             : write_attr(g, key, ftype, mtype, value);
        if (w < 0)
            rc = fail_h5(ST_INTERNAL, s->path, group, "cannot write attribute %s", key);
        H5Gclose(g);
    }
    if (rc != ST_OK)
        s->failed = 1;
    return rc;
}

int h5store_attr_str(struct h5store *s, const char *group, const char *key, const char *value)
{
    return group_attr(s, group, key, H5I_INVALID_HID, H5I_INVALID_HID, NULL, value ? value : "");
}

int h5store_attr_int(struct h5store *s, const char *group, const char *key, long long value)
{
    return group_attr(s, group, key, H5T_STD_I64LE, H5T_NATIVE_LLONG, &value, NULL);
}

int h5store_attr_double(struct h5store *s, const char *group, const char *key, double value)
{
    return group_attr(s, group, key, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &value, NULL);
}

/* File and memory types of a harness dtype (see docs/schema.md). */
static int dtype_types(const struct h5store *s, enum dtype d, hid_t *ftype, hid_t *mtype)
{
    switch (d) {
    case DT_F32: *ftype = H5T_IEEE_F32LE; *mtype = H5T_NATIVE_FLOAT; return 0;
    case DT_F64: *ftype = H5T_IEEE_F64LE; *mtype = H5T_NATIVE_DOUBLE; return 0;
    case DT_F16: *ftype = s->f16_file; *mtype = s->f16_mem; return 0;
    case DT_BF16: *ftype = H5T_STD_U16LE; *mtype = H5T_NATIVE_UINT16; return 0;
    case DT_I64: *ftype = H5T_STD_I64LE; *mtype = H5T_NATIVE_INT64; return 0;
    case DT_U8: case DT_BOOL: *ftype = H5T_STD_U8LE; *mtype = H5T_NATIVE_UINT8; return 0;
    default: return -1;
    }
}

static int write_tensor(struct h5store *s, const char *path, const struct host_tensor *t)
{
    if (!path || !path[0] || !t)
        return error_set(ST_INTERNAL, "%s: dataset needs a path and a tensor", s->path);
    hid_t ftype, mtype;
    if (dtype_types(s, t->dtype, &ftype, &mtype) < 0)
        return error_set(ST_INTERNAL, "%s: %s: cannot store dtype %d", s->path, path, (int)t->dtype);
    if (t->ndim < 0 || t->ndim > HOST_TENSOR_MAX_DIMS || (t->numel > 0 && !t->data))
        return error_set(ST_INTERNAL, "%s: %s: malformed host tensor", s->path, path);

    /* Split "/a/b/name" into the group "/a/b" and the dataset name. */
    size_t n = strlen(path);
    char *parent = malloc(n + 2);
    if (!parent)
        return error_set(ST_INTERNAL, "%s: out of memory", s->path);
    strcpy(parent, path);
    char *slash = strrchr(parent, '/');
    const char *name = slash ? path + (slash - parent) + 1 : path;
    if (slash)
        *slash = '\0';
    if (!parent[0] || !slash)
        strcpy(parent, "/");
    if (!name[0]) {
        free(parent);
        return error_set(ST_INTERNAL, "%s: %s: dataset path ends in '/'", s->path, path);
    }

    hid_t g, space = H5I_INVALID_HID, ds = H5I_INVALID_HID;
    int rc = group_at(s, parent, &g);
    free(parent);
    if (rc != ST_OK)
        return rc;
    hsize_t dims[HOST_TENSOR_MAX_DIMS];
    for (int i = 0; i < t->ndim; i++)
        dims[i] = (hsize_t)t->shape[i];
    /* A rank-0 tensor (a loss) is a scalar dataspace, so h5py gives a
     * numpy scalar and h5dump prints "SCALAR", not a 1-element array. */
    space = t->ndim == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(t->ndim, dims, NULL);
    if (H5Lexists(g, name, H5P_DEFAULT) > 0)
        rc = error_set(ST_INTERNAL, "%s: %s: already written", s->path, path);
    else if (space < 0)
        rc = fail_h5(ST_INTERNAL, s->path, path, "cannot create dataspace");
    else if ((ds = H5Dcreate2(g, name, ftype, space, H5P_DEFAULT, s->dcpl, H5P_DEFAULT)) < 0)
        rc = fail_h5(ST_INTERNAL, s->path, path, "cannot create dataset");
    else if (t->numel > 0 && H5Dwrite(ds, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, t->data) < 0)
        rc = fail_h5(ST_INTERNAL, s->path, path, "cannot write dataset");
    else if (write_str_attr(ds, "dtype", dtype_name(t->dtype)) < 0)
        rc = fail_h5(ST_INTERNAL, s->path, path, "cannot write dtype attribute");
    if (ds >= 0)
        H5Dclose(ds);
    if (space >= 0)
        H5Sclose(space);
    H5Gclose(g);
    return rc;
}

int h5store_write_tensor(struct h5store *s, const char *path, const struct host_tensor *t)
{
    silence_hdf5();
    if (!s)
        return error_set(ST_INTERNAL, "h5store: tensor written to a closed store");
    int rc = write_tensor(s, path, t);
    if (rc != ST_OK)
        s->failed = 1;
    return rc;
}

static int write_run(struct h5store *s, const struct run_record *r)
{
    if (!r || !r->name[0] || strchr(r->name, '/'))
        return error_set(ST_INTERNAL, "%s: run needs a name without '/'", s->path);
    /* Longest path: "/runs/" + name + "/" + item path or attribute group. */
    size_t cap = 6 + sizeof r->name + 1 + RUN_PATH_MAX + RUN_ATTR_KEY_MAX + 1;
    char *full = malloc(cap);
    if (!full)
        return error_set(ST_INTERNAL, "%s: out of memory", s->path);
    snprintf(full, cap, "/runs/%s", r->name);
    hid_t g;
    int rc = group_at(s, full, &g); /* an empty run still gets its group */
    if (rc == ST_OK)
        H5Gclose(g);
    for (int i = 0; i < r->n && rc == ST_OK; i++) {
        snprintf(full, cap, "/runs/%s/%s", r->name, r->items[i].path);
        rc = write_tensor(s, full, &r->items[i].t);
    }
    /* "group.key" goes on /runs/<name>/group as "key" (split at the first
     * dot, so keys may contain dots and groups may not); a key without a
     * dot goes on the run group itself. The reader inverts this. */
    for (int i = 0; i < r->n_attrs && rc == ST_OK; i++) {
        const char *key = r->attrs[i].key;
        const char *dot = strchr(key, '.');
        if (dot && (dot == key || !dot[1])) {
            rc = error_set(ST_INTERNAL, "%s: run %s: malformed attribute key '%s'", s->path,
                           r->name, key);
            break;
        }
        if (dot)
            snprintf(full, cap, "/runs/%s/%.*s", r->name, (int)(dot - key), key);
        else
            snprintf(full, cap, "/runs/%s", r->name);
        /* Whole numbers a double holds exactly (byte counts, recompute
         * counts) are stored as int64 so h5dump prints 1048576, not
         * 1.04858e+06; everything else as float64. Readers take both. */
        double v = r->attrs[i].value;
        long long whole = 0;
        int is_whole = isfinite(v) && fabs(v) <= 9007199254740992.0 && v == trunc(v) &&
                       !(v == 0 && signbit(v));
        if (is_whole)
            whole = (long long)v;
        rc = is_whole ? group_attr(s, full, dot ? dot + 1 : key, H5T_STD_I64LE, H5T_NATIVE_LLONG,
                                   &whole, NULL)
                      : group_attr(s, full, dot ? dot + 1 : key, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE,
                                   &v, NULL);
    }
    /* How the run ended, when it did not simply complete (run_record.h). */
    const struct { const char *key, *value; } texts[] = {
        {"outcome", r->outcome}, {"message", r->message}, {"warning", r->warning}, {"baselines", r->baselines},
        {"op_log", r->op_log}};
    snprintf(full, cap, "/runs/%s", r->name);
    for (size_t i = 0; i < sizeof texts / sizeof *texts && rc == ST_OK; i++)
        if (texts[i].value[0])
            rc = group_attr(s, full, texts[i].key, H5I_INVALID_HID, H5I_INVALID_HID, NULL, texts[i].value);
    free(full);
    return rc;
}

int h5store_write_run(struct h5store *s, const struct run_record *r)
{
    silence_hdf5();
    if (!s)
        return error_set(ST_INTERNAL, "h5store: run written to a closed store");
    int rc = write_run(s, r);
    if (rc != ST_OK)
        s->failed = 1;
    return rc;
}

/* The whole file image, taken from the in-memory file before it closes. */
static int take_image(struct h5store *s, void **image, size_t *len)
{
    *image = NULL;
    if (H5Fflush(s->file, H5F_SCOPE_GLOBAL) < 0)
        return fail_h5(ST_INTERNAL, s->path, NULL, "cannot finish the file");
    ssize_t n = H5Fget_file_image(s->file, NULL, 0);
    if (n <= 0)
        return fail_h5(ST_INTERNAL, s->path, NULL, "cannot take the file image");
    *image = malloc((size_t)n);
    if (!*image)
        return error_set(ST_INTERNAL, "%s: out of memory for a %zd-byte file image", s->path, n);
    if (H5Fget_file_image(s->file, *image, (size_t)n) != n) {
        free(*image);
        *image = NULL;
        return fail_h5(ST_INTERNAL, s->path, NULL, "cannot take the file image");
    }
    *len = (size_t)n;
    return ST_OK;
}

int h5store_commit(struct h5store *s)
{
    silence_hdf5();
    if (!s)
        return error_set(ST_INTERNAL, "h5store: commit of a closed store");
    int rc = ST_OK;
    void *image = NULL;
    size_t len = 0;
    if (s->failed)
        rc = error_set(ST_INTERNAL, "%s: not written: an earlier write to it failed", s->path);
    else
        rc = take_image(s, &image, &len);
    herr_t closed = store_close(s);
    if (rc == ST_OK && closed < 0)
        rc = fail_h5(ST_INTERNAL, s->path, NULL, "closing the in-memory file failed");
    if (rc == ST_OK) {
        rc = temp_file_finish(s->tmp_fd, s->tmp, image, len);
        s->tmp_fd = -1;
        if (rc == ST_OK)
            rc = temp_file_publish(s->tmp, s->path);
        else
            error_wrap(rc, "%s", s->path);
    } else {
        unlink(s->tmp);
    }
    free(image);
    store_free(s);
    return rc;
}

void h5store_abort(struct h5store *s)
{
    if (!s)
        return;
    silence_hdf5();
    store_close(s);
    unlink(s->tmp);
    store_free(s);
}

/* ---- reading -------------------------------------------------------- */

/* 1 if every component of an absolute path exists. H5Lexists answers an
 * error, not 0, when a parent is missing, hence the walk. */
static int path_exists(hid_t file, const char *path)
{
    size_t n = strlen(path);
    char *prefix = malloc(n + 2);
    if (!prefix)
        return 0;
    int ok = 1;
    for (size_t i = 1; i <= n && ok; i++) {
        if (i == n || path[i] == '/') {
            if (path[i - 1] == '/')
                continue; /* "//" or the leading "/" */
            memcpy(prefix, path, i);
            prefix[i] = '\0';
            ok = H5Lexists(file, prefix, H5P_DEFAULT) > 0;
        }
    }
    free(prefix);
    return ok;
}

/* Reads a scalar string attribute, fixed-length (what we write) or
 * variable-length (what h5py writes for a Python str). Returns 1 on
 * success, 0 if it is not a single string, -1 on HDF5 failure, -2 if it
 * does not fit in buf. */
static int attr_string(hid_t attr, char *buf, size_t len)
{
    hid_t ftype = H5Aget_type(attr);
    hid_t space = H5Aget_space(attr);
    hid_t mtype = H5I_INVALID_HID;
    int rc = -1;
    if (ftype < 0 || space < 0)
        goto done;
    if (H5Tget_class(ftype) != H5T_STRING || H5Sget_simple_extent_npoints(space) != 1) {
        rc = 0;
        goto done;
    }
    mtype = H5Tcopy(H5T_C_S1);
    if (mtype < 0 || H5Tset_cset(mtype, H5Tget_cset(ftype)) < 0)
        goto done;
    if (H5Tis_variable_str(ftype) > 0) {
        char *v = NULL;
        if (H5Tset_size(mtype, H5T_VARIABLE) < 0 || H5Aread(attr, mtype, &v) < 0)
            goto done;
        const char *value = v ? v : "";
        rc = strlen(value) < len ? 1 : -2;
        if (rc == 1)
            strcpy(buf, value);
        H5free_memory(v);
    } else {
        size_t n = H5Tget_size(ftype);
        char *tmp = malloc(n + 1);
        if (!tmp || H5Tset_size(mtype, n + 1) < 0 || H5Tset_strpad(mtype, H5T_STR_NULLTERM) < 0 ||
            H5Aread(attr, mtype, tmp) < 0) {
            free(tmp);
            goto done;
        }
        tmp[n] = '\0';
        rc = strlen(tmp) < len ? 1 : -2;
        if (rc == 1)
            strcpy(buf, tmp);
        free(tmp);
    }
done:
    if (mtype >= 0)
        H5Tclose(mtype);
    if (space >= 0)
        H5Sclose(space);
    if (ftype >= 0)
        H5Tclose(ftype);
    return rc;
}

/* Opens a report for reading after the checks that give each kind of bad
 * input its own message: exists, is a file, is HDF5, opens (a truncated
 * file fails here), has schema_version == H5STORE_SCHEMA_VERSION. */
static int open_report(const char *path, hid_t *out)
{
    *out = H5I_INVALID_HID;
    if (!path || !path[0])
        return error_set(ST_INPUT, "h5store: empty input path");
    struct stat st;
    if (stat(path, &st) != 0)
        return error_set(ST_INPUT, "%s: %s", path, strerror(errno));
    if (S_ISDIR(st.st_mode))
        return error_set(ST_INPUT, "%s: is a directory, not an HDF5 file", path);
    if (!S_ISREG(st.st_mode)) /* a FIFO would block HDF5's open for ever */
        return error_set(ST_INPUT, "%s: not a regular file, not an HDF5 file", path);
    if (st.st_size == 0)
        return error_set(ST_INPUT, "%s: empty file, not an HDF5 file", path);
#if H5_VERSION_GE(1, 12, 0)
    htri_t is = H5Fis_accessible(path, H5P_DEFAULT);
#else
    htri_t is = H5Fis_hdf5(path);
#endif
    if (is == 0)
        return error_set(ST_INPUT, "%s: not an HDF5 file", path);
    if (is < 0)
        return fail_h5(ST_INPUT, path, NULL, "cannot read");
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0)
        return fail_h5(ST_INPUT, path, NULL, "truncated or damaged HDF5 file");

    int rc = ST_OK;
    long long version = 0;
    hid_t a = H5I_INVALID_HID, t = H5I_INVALID_HID, sp = H5I_INVALID_HID;
    htri_t has = H5Aexists(f, "schema_version");
    if (has == 0) {
        rc = error_set(ST_INPUT, "%s: /: attribute schema_version missing (not a ckpt-verify "
                                 "report?)",
                       path);
    } else if (has < 0 || (a = H5Aopen(f, "schema_version", H5P_DEFAULT)) < 0 ||
               (t = H5Aget_type(a)) < 0 || (sp = H5Aget_space(a)) < 0) {
        rc = fail_h5(ST_INPUT, path, "/", "cannot read attribute schema_version");
    } else if (H5Tget_class(t) != H5T_INTEGER || H5Sget_simple_extent_npoints(sp) != 1) {
        rc = error_set(ST_INPUT, "%s: /: schema_version is not an integer", path);
    } else if (H5Aread(a, H5T_NATIVE_LLONG, &version) < 0) {
        rc = fail_h5(ST_INPUT, path, "/", "cannot read attribute schema_version");
    } else if (version != H5STORE_SCHEMA_VERSION) {
        rc = error_set(ST_INPUT, "%s: /: schema_version is %lld, this harness reads %d", path,
                       version, H5STORE_SCHEMA_VERSION);
    }
    if (sp >= 0)
        H5Sclose(sp);
    if (t >= 0)
        H5Tclose(t);
    if (a >= 0)
        H5Aclose(a);
    if (rc != ST_OK) {
        H5Fclose(f);
        return rc;
    }
    *out = f;
    return ST_OK;
}

int h5store_check_file(const char *path)
{
    silence_hdf5();
    hid_t f;
    int rc = open_report(path, &f);
    if (rc == ST_OK)
        H5Fclose(f);
    return rc;
}

/* "8-byte float", "2-byte unsigned integer": for messages. */
static const char *storage_str(hid_t ftype, char *buf, size_t len)
{
    const char *kind;
    switch (H5Tget_class(ftype)) {
    case H5T_FLOAT: kind = "float"; break;
    case H5T_INTEGER: kind = H5Tget_sign(ftype) == H5T_SGN_NONE ? "unsigned integer" : "integer"; break;
    case H5T_ENUM: kind = "enum"; break;
    case H5T_STRING: kind = "string"; break;
    case H5T_COMPOUND: kind = "compound"; break;
    default: kind = "non-numeric"; break;
    }
    snprintf(buf, len, "%zu-byte %s", H5Tget_size(ftype), kind);
    return buf;
}

/* Chooses the harness dtype of a dataset and the memory type to read it
 * with. From the HDF5 type: floats of 4 and 8 bytes, 2-byte floats laid out
 * as IEEE half (float16) or as bfloat16, unsigned 1-byte integers (uint8),
 * other integers widened to int64 (lossless; uint64 is refused), 1-byte
 * enums (h5py's bool). The "dtype" attribute, when present, must agree; it
 * is what marks 16-bit integer bit patterns as bfloat16 (or float16) and
 * uint8 as bool.
 * *mtype is a new handle for the caller to close. */
static int read_plan(hid_t ftype, int want, const char *file, const char *where, enum dtype *dt,
                     hid_t *mtype)
{
    char what[64];
    size_t size = H5Tget_size(ftype);
    int have = -1; /* dtype inferred from the storage */
    hid_t base = H5I_INVALID_HID;
    *mtype = H5I_INVALID_HID;
    switch (H5Tget_class(ftype)) {
    case H5T_FLOAT:
        if (size == 4) {
            have = DT_F32, base = H5T_NATIVE_FLOAT;
        } else if (size == 8) {
            have = DT_F64, base = H5T_NATIVE_DOUBLE;
        } else if (size == 2) {
            size_t spos, epos, esize, mpos, msize;
            if (H5Tget_fields(ftype, &spos, &epos, &esize, &mpos, &msize) < 0)
                return fail_h5(ST_INPUT, file, where, "unreadable float type");
            if (esize == 5 && msize == 10)
                have = DT_F16, *mtype = make_half(H5T_NATIVE_FLOAT);
            else if (esize == 8 && msize == 7)
                have = DT_BF16, *mtype = make_bf16_float(H5T_NATIVE_FLOAT);
        }
        break;
    case H5T_INTEGER: {
        int is_signed = H5Tget_sign(ftype) != H5T_SGN_NONE;
        if (size == 2 && (want == DT_BF16 || want == DT_F16))
            /* 16-bit float bit patterns kept in an integer dataset: read
             * the bits as they are (same width, no value conversion). */
            have = want, base = is_signed ? H5T_NATIVE_INT16 : H5T_NATIVE_UINT16;
        else if (!is_signed && size == 1)
            have = DT_U8, base = H5T_NATIVE_UINT8;
        else if (is_signed ? size <= 8 : size < 8)
            have = DT_I64, base = H5T_NATIVE_INT64;
        break;
    }
    case H5T_ENUM:
        if (size == 1) {
            have = DT_BOOL;
            *mtype = H5Tget_native_type(ftype, H5T_DIR_ASCEND);
        }
        break;
    default:
        break;
    }
    int same_bytes = (want == DT_BOOL && have == DT_U8) || (want == DT_U8 && have == DT_BOOL);
    int rc = ST_OK;
    if (have < 0)
        rc = error_set(ST_INPUT, "%s: %s: unsupported element type (%s)", file, where,
                       storage_str(ftype, what, sizeof what));
    else if (want >= 0 && want != have && !same_bytes)
        rc = error_set(ST_INPUT, "%s: %s: dtype attribute says %s but the dataset holds %s values",
                       file, where, dtype_name((enum dtype)want),
                       storage_str(ftype, what, sizeof what));
    if (rc != ST_OK) {
        if (*mtype >= 0)
            H5Tclose(*mtype);
        *mtype = H5I_INVALID_HID;
        return rc;
    }
    if (base >= 0)
        *mtype = H5Tcopy(base);
    if (*mtype < 0)
        return fail_h5(ST_INPUT, file, where, "cannot build a memory type");
    *dt = (enum dtype)(want >= 0 ? want : have);
    return ST_OK;
}

/* The "dtype" attribute as a dtype, -1 when absent. Accepts "torch.float16"
 * style values (what str(tensor.dtype) gives in a cross-check script). */
static int dtype_attr(hid_t ds, const char *file, const char *where, int *want)
{
    *want = -1;
    htri_t has = H5Aexists(ds, "dtype");
    if (has == 0)
        return ST_OK;
    char buf[64];
    hid_t a = has > 0 ? H5Aopen(ds, "dtype", H5P_DEFAULT) : H5I_INVALID_HID;
    int got = a >= 0 ? attr_string(a, buf, sizeof buf) : -1;
    int rc = ST_OK;
    if (got < 0 && got != -2)
        rc = fail_h5(ST_INPUT, file, where, "unreadable dtype attribute");
    else if (got <= 0)
        rc = error_set(ST_INPUT, "%s: %s: dtype attribute is not a short string", file, where);
    if (a >= 0)
        H5Aclose(a);
    if (rc != ST_OK)
        return rc;
    const char *dot = strrchr(buf, '.');
    *want = dtype_from_name(dot ? dot + 1 : buf);
    if (*want < 0)
        return error_set(ST_INPUT, "%s: %s: unknown dtype attribute '%s'", file, where, buf);
    return ST_OK;
}

/* A damaged or crafted file can claim a shape far larger than the data it
 * holds (the layout's size field is only a claim too); allocating for that
 * fails at best and gets the process killed at worst. So the size the shape
 * implies must fit in the address space and in this file: contiguous and
 * compact data are stored as they are (so within the file, and all of it
 * written), chunked data may be compressed (so within deflate's best ratio,
 * about 1032:1, of the whole file). Data kept in other files (external
 * storage, virtual datasets) is refused: a report is one file, and a
 * crafted one must not make us read any other. */
static int check_dataset_size(hid_t ds, hid_t ftype, int ndim, const hsize_t *dims,
                              const char *file, const char *where)
{
    hsize_t bytes = H5Tget_size(ftype);
    for (int i = 0; i < ndim; i++) {
        if (dims[i] > 0 && bytes > (hsize_t)(SIZE_MAX / 2) / dims[i])
            return error_set(ST_INPUT, "%s: %s: shape too large to load", file, where);
        bytes *= dims[i];
    }
    hid_t dcpl = H5Dget_create_plist(ds);
    H5D_layout_t layout = dcpl >= 0 ? H5Pget_layout(dcpl) : H5D_LAYOUT_ERROR;
    int external = dcpl >= 0 ? H5Pget_external_count(dcpl) : -1;
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (layout == H5D_LAYOUT_ERROR || external < 0)
        return fail_h5(ST_INPUT, file, where, "unreadable storage layout");
    if (external > 0 || layout == H5D_VIRTUAL)
        return error_set(ST_INPUT, "%s: %s: data stored in other files (%s) is not supported", file,
                         where, external > 0 ? "external storage" : "a virtual dataset");
    if (bytes == 0)
        return ST_OK;
    hsize_t file_bytes = 0;
    hid_t f = H5Iget_file_id(ds);
    herr_t got = f >= 0 ? H5Fget_filesize(f, &file_bytes) : -1;
    if (f >= 0)
        H5Fclose(f); /* a second handle on the file: closing it keeps the file open */
    if (got < 0)
        return fail_h5(ST_INPUT, file, where, "cannot get the file size");
    int stored_as_is = layout == H5D_CONTIGUOUS || layout == H5D_COMPACT;
    if (stored_as_is) {
        hsize_t stored = H5Dget_storage_size(ds);
        if (stored < bytes)
            return error_set(ST_INPUT, "%s: %s: the file holds %llu of its %llu bytes (damaged, or "
                                       "never written)", file, where, (unsigned long long)stored,
                             (unsigned long long)bytes);
    }
    if (stored_as_is ? bytes > file_bytes : bytes / 1032 > file_bytes)
        return error_set(ST_INPUT, "%s: %s: shape needs %llu bytes, more than a %llu-byte file "
                                   "holds%s", file, where, (unsigned long long)bytes,
                         (unsigned long long)file_bytes, stored_as_is ? "" : " even compressed");
    return ST_OK;
}

/* Loads an open dataset into out (allocated here). `where` is its absolute
 * path, for messages. */
static int load_dataset(hid_t ds, const char *file, const char *where, struct host_tensor *out,
                        uint64_t *budget)
{
    memset(out, 0, sizeof *out);
    int want;
    int rc = dtype_attr(ds, file, where, &want);
    if (rc != ST_OK)
        return rc;
    hid_t ftype = H5Dget_type(ds), space = H5I_INVALID_HID, mtype = H5I_INVALID_HID;
    enum dtype dt = DT_F32;
    if (ftype < 0)
        return fail_h5(ST_INPUT, file, where, "unreadable datatype");
    rc = read_plan(ftype, want, file, where, &dt, &mtype);
    if (rc == ST_OK && (space = H5Dget_space(ds)) < 0)
        rc = fail_h5(ST_INPUT, file, where, "unreadable dataspace");
    if (rc == ST_OK) {
        H5S_class_t cls = H5Sget_simple_extent_type(space);
        int ndim = cls == H5S_SIMPLE ? H5Sget_simple_extent_ndims(space) : 0;
        hsize_t dims[HOST_TENSOR_MAX_DIMS];
        int64_t shape[HOST_TENSOR_MAX_DIMS];
        if (cls != H5S_SIMPLE && cls != H5S_SCALAR)
            rc = error_set(ST_INPUT, "%s: %s: empty (null) dataspace", file, where);
        else if (ndim < 0 || ndim > HOST_TENSOR_MAX_DIMS)
            rc = error_set(ST_INPUT, "%s: %s: rank %d exceeds %d", file, where, ndim,
                           HOST_TENSOR_MAX_DIMS);
        else if (ndim > 0 && H5Sget_simple_extent_dims(space, dims, NULL) < 0)
            rc = fail_h5(ST_INPUT, file, where, "unreadable dataspace");
        else
            rc = check_dataset_size(ds, ftype, ndim, dims, file, where);
        if (rc == ST_OK && budget) {
            /* What the whole read may load: one dataset hard-linked many
             * times is loaded as many times. */
            uint64_t bytes = dtype_size(dt);
            for (int i = 0; i < ndim; i++)
                bytes = dims[i] && bytes > UINT64_MAX / dims[i] ? UINT64_MAX : bytes * dims[i];
            if (bytes > *budget)
                rc = error_set(ST_INPUT, "%s: %s: loading its %llu bytes would pass the %llu-byte limit on what one "
                                         "read may load (CKPT_MEMORY_LIMIT)",
                               file, where, (unsigned long long)bytes, (unsigned long long)*budget);
            else
                *budget -= bytes;
        }
        if (rc == ST_OK) {
            for (int i = 0; i < ndim; i++)
                shape[i] = (int64_t)dims[i];
            rc = host_tensor_alloc(out, dt, ndim, shape);
        }
        if (rc == ST_OK && out->numel > 0 &&
            H5Dread(ds, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, out->data) < 0) {
            rc = fail_h5(ST_INPUT, file, where, "unreadable dataset");
            host_tensor_free(out);
        }
    }
    if (mtype >= 0)
        H5Tclose(mtype);
    if (space >= 0)
        H5Sclose(space);
    H5Tclose(ftype);
    return rc;
}

int h5store_read_tensor(const char *path, const char *dataset, struct host_tensor *out)
{
    silence_hdf5();
    memset(out, 0, sizeof *out);
    hid_t f;
    int rc = open_report(path, &f);
    if (rc != ST_OK)
        return rc;
    hid_t ds = H5I_INVALID_HID;
    if (!dataset || !dataset[0] || !path_exists(f, dataset))
        rc = error_set(ST_INPUT, "%s: %s: dataset missing", path, dataset ? dataset : "");
    else if ((ds = H5Dopen2(f, dataset, H5P_DEFAULT)) < 0)
        rc = fail_h5(ST_INPUT, path, dataset, "not a readable dataset");
    else
        rc = load_dataset(ds, path, dataset, out, NULL);
    if (ds >= 0)
        H5Dclose(ds);
    H5Fclose(f);
    return rc;
}

int h5store_read_attr_str(const char *path, const char *group, const char *key, char *buf,
                          size_t len)
{
    silence_hdf5();
    if (buf && len)
        buf[0] = '\0';
    hid_t f;
    int rc = open_report(path, &f);
    if (rc != ST_OK)
        return rc;
    hid_t obj = H5I_INVALID_HID, a = H5I_INVALID_HID;
    htri_t has = 0;
    if (!group || !key || !buf || !len)
        rc = error_set(ST_INTERNAL, "%s: read_attr_str needs a group, a key and a buffer", path);
    else if (!path_exists(f, group) || (obj = H5Oopen(f, group, H5P_DEFAULT)) < 0)
        rc = error_set(ST_INPUT, "%s: %s: group missing", path, group);
    else if ((has = H5Aexists(obj, key)) <= 0)
        rc = error_set(ST_INPUT, "%s: %s: attribute %s missing", path, group, key);
    else if ((a = H5Aopen(obj, key, H5P_DEFAULT)) < 0)
        rc = fail_h5(ST_INPUT, path, group, "unreadable attribute %s", key);
    if (rc == ST_OK) {
        int got = attr_string(a, buf, len);
        if (got == -1)
            rc = fail_h5(ST_INPUT, path, group, "unreadable attribute %s", key);
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
    H5Fclose(f);
    return rc;
}

struct attr_walk {
    const char *file, *group;
    int (*fn)(void *ctx, const char *key, const char *value);
    void *ctx;
    int status;
};

/* An attribute opened with its type and dataspace; any of the three is
 * negative when it could not be had. attr_close closes what opened. */
struct open_attr {
    hid_t a, type, space;
};

static struct open_attr attr_open(hid_t loc, const char *name)
{
    struct open_attr o;
    o.a = H5Aopen(loc, name, H5P_DEFAULT);
    o.type = o.a >= 0 ? H5Aget_type(o.a) : H5I_INVALID_HID;
    o.space = o.a >= 0 ? H5Aget_space(o.a) : H5I_INVALID_HID;
    return o;
}

static void attr_close(struct open_attr *o)
{
    if (o->space >= 0)
        H5Sclose(o->space);
    if (o->type >= 0)
        H5Tclose(o->type);
    if (o->a >= 0)
        H5Aclose(o->a);
}

/* One scalar attribute as text: strings as stored, integers in decimal,
 * floats with every digit needed to read them back. Others are skipped. */
static herr_t walk_attr(hid_t loc, const char *name, const H5A_info_t *info, void *data)
{
    (void)info;
    struct attr_walk *w = data;
    char value[8192];
    struct open_attr o = attr_open(loc, name);
    hid_t a = o.a, t = o.type, sp = o.space;
    int have = 0;
    if (t < 0 || sp < 0) {
        w->status = fail_h5(ST_INPUT, w->file, w->group, "unreadable attribute %s", name);
    } else if (H5Sget_simple_extent_npoints(sp) == 1) {
        H5T_class_t cls = H5Tget_class(t);
        if (cls == H5T_STRING) {
            int got = attr_string(a, value, sizeof value);
            if (got == -1)
                w->status = fail_h5(ST_INPUT, w->file, w->group, "unreadable attribute %s", name);
            else if (got == -2)
                w->status = error_set(ST_INPUT, "%s: %s: attribute %s longer than %zu bytes", w->file, w->group,
                                      name, sizeof value - 1);
            have = got == 1;
        } else if (cls == H5T_INTEGER) {
            long long i;
            if (H5Aread(a, H5T_NATIVE_LLONG, &i) < 0)
                w->status = fail_h5(ST_INPUT, w->file, w->group, "unreadable attribute %s", name);
            else
                have = snprintf(value, sizeof value, "%lld", i) > 0;
        } else if (cls == H5T_FLOAT) {
            double d;
            if (H5Aread(a, H5T_NATIVE_DOUBLE, &d) < 0)
                w->status = fail_h5(ST_INPUT, w->file, w->group, "unreadable attribute %s", name);
            else
                have = snprintf(value, sizeof value, "%.17g", d) > 0;
        }
    }
    if (have && w->status == ST_OK)
        w->status = w->fn(w->ctx, name, value);
    attr_close(&o);
    return w->status == ST_OK ? 0 : -1;
}

int h5store_has_group(const char *path, const char *group)
{
    silence_hdf5();
    hid_t f;
    if (open_report(path, &f) != ST_OK) {
        error_clear();
        return 0;
    }
    int has = path_exists(f, group);
    H5Fclose(f);
    return has;
}

int h5store_foreach_attr(const char *path, const char *group, int (*fn)(void *ctx, const char *key, const char *value),
                         void *ctx)
{
    silence_hdf5();
    hid_t f;
    int rc = open_report(path, &f);
    if (rc != ST_OK)
        return rc;
    struct attr_walk w = {path, group, fn, ctx, ST_OK};
    hid_t obj = H5I_INVALID_HID;
    if (!path_exists(f, group) || (obj = H5Oopen(f, group, H5P_DEFAULT)) < 0)
        rc = error_set(ST_INPUT, "%s: %s: group missing", path, group);
    else if (H5Aiterate2(obj, H5_INDEX_NAME, H5_ITER_INC, NULL, walk_attr, &w) < 0)
        rc = w.status != ST_OK ? w.status : fail_h5(ST_INPUT, path, group, "cannot list attributes");
    if (obj >= 0)
        H5Oclose(obj);
    H5Fclose(f);
    return rc;
}

/* ---- listing runs --------------------------------------------------- */

struct run_list {
    const char *file;
    char (*names)[64];
    int n, cap;
    int status;
};

static herr_t list_link(hid_t group, const char *name, const H5L_info_t *info, void *data)
{
    struct run_list *l = data;
    if (info->type == H5L_TYPE_EXTERNAL) {
        l->status = error_set(ST_INPUT, "%s: /runs/%s: external link to another file is not supported", l->file,
                              name);
        return -1;
    }
    if (info->type != H5L_TYPE_HARD)
        return 0;
    hid_t obj = H5Oopen(group, name, H5P_DEFAULT);
    if (obj < 0) {
        l->status = fail_h5(ST_INPUT, l->file, "/runs", "unreadable entry %s", name);
        return -1;
    }
    int is_group = H5Iget_type(obj) == H5I_GROUP;
    H5Oclose(obj);
    if (!is_group)
        return 0;
    if (strlen(name) >= sizeof l->names[0]) {
        l->status = error_set(ST_INPUT, "%s: /runs/%s: run name longer than 63 bytes", l->file,
                              name);
        return -1;
    }
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 8;
        char(*names)[64] = realloc(l->names, (size_t)cap * sizeof *names);
        if (!names) {
            l->status = error_set(ST_INTERNAL, "%s: out of memory listing runs", l->file);
            return -1;
        }
        l->names = names;
        l->cap = cap;
    }
    strcpy(l->names[l->n++], name);
    return 0;
}

int h5store_list_runs(const char *path, char (**names)[64], int *count)
{
    silence_hdf5();
    *names = NULL;
    *count = 0;
    hid_t f;
    int rc = open_report(path, &f);
    if (rc != ST_OK)
        return rc;
    struct run_list l = {path, NULL, 0, 0, ST_OK};
    hid_t g = H5I_INVALID_HID;
    if (!path_exists(f, "/runs") || (g = H5Gopen2(f, "/runs", H5P_DEFAULT)) < 0)
        rc = error_set(ST_INPUT, "%s: /runs: group missing", path);
    else if (H5Literate(g, H5_INDEX_NAME, H5_ITER_INC, NULL, list_link, &l) < 0)
        rc = l.status != ST_OK ? l.status : fail_h5(ST_INPUT, path, "/runs", "cannot list runs");
    if (g >= 0)
        H5Gclose(g);
    H5Fclose(f);
    if (rc != ST_OK) {
        free(l.names);
        return rc;
    }
    *names = l.names;
    *count = l.n;
    return ST_OK;
}

int h5store_check_run(const char *path, const struct run_record *r)
{
    int steps = 0;
    for (int i = 0; i < r->n; i++) {
        const char *p = r->items[i].path;
        if (strncmp(p, "steps/", 6) != 0)
            continue;
        const char *k = p + 6;
        size_t digits = strspn(k, "0123456789");
        if (digits == 0 || k[digits] != '/')
            return error_set(ST_INPUT, "%s: /runs/%s/%s: not under a numbered step (steps/<k>/...)",
                             path, r->name, p);
        steps++;
        /* Each step's loss is checked once, from the step's first entry;
         * the reader sorts the loss first within its step. */
        char loss[RUN_PATH_MAX];
        snprintf(loss, sizeof loss, "steps/%.*s/loss", (int)digits, k);
        if (i > 0 && strncmp(r->items[i - 1].path, p, 6 + digits + 1) == 0)
            continue;
        const struct run_tensor *t = run_record_find(r, loss);
        if (!t)
            return error_set(ST_INPUT, "%s: /runs/%s/%s: dataset missing", path, r->name, loss);
        if (t->t.numel != 1)
            return error_set(ST_INPUT, "%s: /runs/%s/%s: holds %zu values, expected one", path,
                             r->name, loss, t->t.numel);
    }
    if (steps == 0)
        return error_set(ST_INPUT, "%s: /runs/%s/steps: no step recorded", path, r->name);
    return ST_OK;
}

/* ---- reading a run -------------------------------------------------- */

struct run_visit {
    const char *file;
    const char *run_path; /* "/runs/<run>" */
    struct run_record *rec;
    uint64_t *budget; /* bytes the read may still load */
    const char *prefix; /* subgroup path for attribute keys, NULL for the run group */
    int status;
};

/* Numeric single-value attributes of a group become run attributes: on the
 * run group "key", on a subgroup "<subgroup path>.key". Others (strings,
 * arrays, enums) are not numeric facts about the run and are skipped. */
static herr_t visit_attr(hid_t loc, const char *name, const H5A_info_t *info, void *data)
{
    (void)info;
    struct run_visit *v = data;
    char key[RUN_ATTR_KEY_MAX];
    char where[RUN_PATH_MAX + 80];
    snprintf(where, sizeof where, "%s%s%s", v->run_path, v->prefix ? "/" : "",
             v->prefix ? v->prefix : "");
    struct open_attr o = attr_open(loc, name);
    hid_t a = o.a, t = o.type, sp = o.space;
    if (t < 0 || sp < 0) {
        v->status = fail_h5(ST_INPUT, v->file, where, "unreadable attribute %s", name);
    } else {
        H5T_class_t cls = H5Tget_class(t);
        char *text = NULL;
        size_t text_len = 0;
        if (!v->prefix && cls == H5T_STRING) {
            if (strcmp(name, "outcome") == 0)
                text = v->rec->outcome, text_len = sizeof v->rec->outcome;
            else if (strcmp(name, "message") == 0)
                text = v->rec->message, text_len = sizeof v->rec->message;
            else if (strcmp(name, "warning") == 0)
                text = v->rec->warning, text_len = sizeof v->rec->warning;
            else if (strcmp(name, "baselines") == 0)
                text = v->rec->baselines, text_len = sizeof v->rec->baselines;
            else if (strcmp(name, "op_log") == 0)
                text = v->rec->op_log, text_len = sizeof v->rec->op_log;
        }
        if (text) {
            int got = attr_string(a, text, text_len);
            if (got == -1)
                v->status = fail_h5(ST_INPUT, v->file, where, "unreadable attribute %s", name);
            else if (got == -2)
                v->status = error_set(ST_INPUT, "%s: %s: attribute %s longer than %zu bytes", v->file, where, name,
                                      text_len - 1);
            else if (strcmp(name, "outcome") == 0 && text[0] && strcmp(text, RUN_OUTCOME_ERROR) &&
                     strcmp(text, RUN_OUTCOME_CHECK_FAILED))
                v->status = error_set(ST_INPUT, "%s: %s: attribute outcome is '%s', expected '%s' or '%s'", v->file,
                                      where, text, RUN_OUTCOME_ERROR, RUN_OUTCOME_CHECK_FAILED);
        } else if ((cls == H5T_INTEGER || cls == H5T_FLOAT) && H5Sget_simple_extent_npoints(sp) == 1) {
            double value;
            int n = snprintf(key, sizeof key, "%s%s%s", v->prefix ? v->prefix : "",
                             v->prefix ? "." : "", name);
            if (n < 0 || (size_t)n >= sizeof key)
                v->status = error_set(ST_INPUT, "%s: %s: attribute key %s.%s longer than %d bytes",
                                      v->file, where, v->prefix ? v->prefix : "", name,
                                      RUN_ATTR_KEY_MAX - 1);
            else if (H5Aread(a, H5T_NATIVE_DOUBLE, &value) < 0)
                v->status = fail_h5(ST_INPUT, v->file, where, "unreadable attribute %s", name);
            else
                v->status = run_record_set_attr(v->rec, key, value);
        }
    }
    attr_close(&o);
    return v->status == ST_OK ? 0 : -1;
}

static int group_attrs(hid_t group, struct run_visit *v, const char *prefix)
{
    v->prefix = prefix;
    herr_t rc = H5Aiterate2(group, H5_INDEX_NAME, H5_ITER_INC, NULL, visit_attr, v);
    if (rc < 0 && v->status == ST_OK)
        v->status = fail_h5(ST_INPUT, v->file, v->run_path, "cannot list attributes");
    return v->status;
}

static herr_t visit_link(hid_t group, const char *name, const H5L_info_t *info, void *data)
{
    struct run_visit *v = data;
    char where[RUN_PATH_MAX * 2 + 80];
    snprintf(where, sizeof where, "%s/%s", v->run_path, name);
    /* A report is one file: an external link would make another file's
     * data pass for this run's (or drop a step unseen). */
    if (info->type == H5L_TYPE_EXTERNAL) {
        v->status = error_set(ST_INPUT, "%s: %s: external link to another file is not supported", v->file, where);
        return -1;
    }
    if (info->type != H5L_TYPE_HARD)
        return 0; /* soft links name what the run holds under another path */
    hid_t obj = H5Oopen(group, name, H5P_DEFAULT);
    if (obj < 0) {
        v->status = fail_h5(ST_INPUT, v->file, where, "unreadable object");
        return -1;
    }
    H5I_type_t type = H5Iget_type(obj);
    if (type == H5I_DATASET) {
        struct host_tensor t;
        if (strlen(name) >= RUN_PATH_MAX)
            v->status = error_set(ST_INPUT, "%s: %s: path longer than %d bytes", v->file, where,
                                  RUN_PATH_MAX - 1);
        else if ((v->status = load_dataset(obj, v->file, where, &t, v->budget)) == ST_OK &&
                 (v->status = run_record_add(v->rec, name, &t)) != ST_OK)
            host_tensor_free(&t);
    } else if (type == H5I_GROUP) {
        group_attrs(obj, v, name);
    }
    H5Oclose(obj);
    return v->status == ST_OK ? 0 : -1;
}

/* ST_INPUT when the link at an absolute path leads into another file. */
static int check_not_external(hid_t f, const char *file, const char *link)
{
    H5L_info_t info;
    if (H5Lget_info(f, link, &info, H5P_DEFAULT) >= 0 && info.type == H5L_TYPE_EXTERNAL)
        return error_set(ST_INPUT, "%s: %s: external link to another file is not supported", file, link);
    return ST_OK;
}

int h5store_read_run(const char *path, const char *run, struct run_record *out)
{
    uint64_t budget = H5STORE_READ_LIMIT;
    return h5store_read_run_within(path, run, &budget, out);
}

int h5store_read_run_within(const char *path, const char *run, uint64_t *budget, struct run_record *out)
{
    silence_hdf5();
    run_record_init(out, run ? run : "");
    hid_t f;
    int rc = open_report(path, &f);
    if (rc != ST_OK)
        return rc;
    char run_path[sizeof out->name + 8];
    snprintf(run_path, sizeof run_path, "/runs/%s", out->name);
    struct run_visit v = {path, run_path, out, budget, NULL, ST_OK};
    hid_t g = H5I_INVALID_HID;
    if (!run || !run[0] || strchr(run, '/') || strlen(run) >= sizeof out->name ||
        !path_exists(f, run_path)) {
        rc = error_set(ST_INPUT, "%s: /runs/%s: run missing", path, run ? run : "");
    } else if ((rc = check_not_external(f, path, "/runs")) || (rc = check_not_external(f, path, run_path))) {
        /* message set */
    } else if ((g = H5Gopen2(f, run_path, H5P_DEFAULT)) < 0) {
        rc = error_set(ST_INPUT, "%s: /runs/%s: run missing", path, run ? run : "");
    } else if ((rc = group_attrs(g, &v, NULL)) == ST_OK &&
               H5Lvisit(g, H5_INDEX_NAME, H5_ITER_INC, visit_link, &v) < 0) {
        rc = v.status != ST_OK ? v.status : fail_h5(ST_INPUT, path, run_path, "cannot walk run");
    }
    if (g >= 0)
        H5Gclose(g);
    H5Fclose(f);
    if (rc != ST_OK) {
        run_record_free(out);
        return rc;
    }
    run_record_sort(out);
    return ST_OK;
}
