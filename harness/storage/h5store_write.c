/* h5store_write: the writer of h5store.h. The file is written on disk as
 * its temporary while the case runs, so its size is bounded by the disk,
 * not by memory, and renamed into place at commit, so a killed or failed
 * run never leaves a half-written report. Before each write the room for
 * it is reserved (disk_room.h): HDF5 itself never meets a full disk.
 * A run's tensor bitwise equal to its reference run's (baseline_0's) is a
 * hard link to that dataset, not a copy; every run dataset carries the
 * zlib CRC-32 of its bytes (docs/schema.md, "Identical tensors").
 *
 * Error handling. Every entry point silences HDF5's own error printer first
 * (h5store_internal.h) and every failure becomes one error_set() line "FILE:
 * /PATH/IN/FILE: what went wrong (HDF5's innermost reason)". The reason is
 * read from HDF5's error stack right after the failing call, before any
 * cleanup call clears it, which is why the code sets its message before
 * closing handles.
 *
 * No global mutable state: everything a writer needs lives in struct
 * h5store. */
#define _POSIX_C_SOURCE 200809L

#include "h5store.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <unistd.h>

#include <hdf5.h>
#include <zlib.h>

#include "disk_room.h"
#include "error.h"
#include "h5store_internal.h"
#include "temp_file.h"

struct h5store {
    char *path;     /* the final name, as the caller gave it: used in messages */
    char *tmp;      /* "<path>.XXXXXX.tmp" (temp_file.h): the file until the rename */
    int tmp_fd;     /* open on tmp until commit: room is reserved through it */
    struct disk_room room;
    hid_t file;     /* HDF5's default (sec2) driver on tmp */
    hid_t gcpl;     /* groups: link creation order tracked + indexed, no timestamps */
    hid_t dcpl;     /* datasets: no timestamps */
    hid_t f16_file; /* IEEE half, little-endian: what float16 datasets are stored as */
    hid_t f16_mem;  /* the same layout in native byte order: what host memory holds */
    int failed;     /* a write failed: commit refuses, so no partial report is published */
};

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
    /* The file closes (and reaches the disk) only when nothing in it is
     * open any more: the default (weak) close degree, which readers of the
     * temporary in this process share. Every writer here closes what it
     * opens, so anything still open is a leak, refused. */
    if (s->file >= 0 && H5Fget_obj_count(s->file, H5F_OBJ_ALL | H5F_OBJ_LOCAL) > 1)
        rc = -1;
    if (s->file >= 0 && H5Fclose(s->file) < 0)
        rc = -1;
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

/* Room for the file to reach `bytes` more than it holds now (and HDF5's
 * metadata margin), before anything is handed to HDF5. */
static int ensure_room(struct h5store *s, uint64_t bytes)
{
    hsize_t size = 0;
    if (s->file >= 0 && H5Fget_filesize(s->file, &size) < 0)
        return h5store_fail(ST_INTERNAL, s->path, NULL, "cannot get the file size");
    int rc = disk_room_ensure(&s->room, (uint64_t)size + bytes);
    if (rc != ST_OK)
        s->failed = 1;
    return rc;
}

int h5store_create(struct h5store **out, const char *path)
{
    h5store_silence_hdf5();
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
    disk_room_init(&s->room, s->tmp_fd, s->path);
    if ((rc = ensure_room(s, 0)) != ST_OK) {
        unlink(s->tmp);
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
        H5Pset_obj_track_times(s->dcpl, 0) < 0) {
        rc = h5store_fail(ST_INTERNAL, path, NULL, "cannot set up HDF5 property lists");
    } else if ((s->f16_file = h5store_half_type(H5T_IEEE_F32LE)) < 0 ||
               (s->f16_mem = h5store_half_type(H5T_NATIVE_FLOAT)) < 0) {
        rc = h5store_fail(ST_INTERNAL, path, NULL, "cannot build the float16 HDF5 type");
    } else if ((s->file = H5Fcreate(s->tmp, H5F_ACC_TRUNC, fcpl, fapl)) < 0) {
        rc = h5store_fail(ST_INTERNAL, path, NULL, "cannot create HDF5 file %s", s->tmp);
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
        rc = h5store_fail(ST_INTERNAL, s->path, "/", "cannot open root group");
    char *save = NULL;
    for (char *c = strtok_r(copy, "/", &save); c && rc == ST_OK; c = strtok_r(NULL, "/", &save)) {
        htri_t exists = H5Lexists(cur, c, H5P_DEFAULT);
        hid_t next = H5I_INVALID_HID;
        if (exists > 0) {
            next = H5Gopen2(cur, c, H5P_DEFAULT);
            if (next < 0)
                rc = h5store_fail(ST_INTERNAL, s->path, group, "'%s' exists and is not a group", c);
        } else {
            next = H5Gcreate2(cur, c, H5P_DEFAULT, s->gcpl, H5P_DEFAULT);
            if (next < 0)
                rc = h5store_fail(ST_INTERNAL, s->path, group, "cannot create group '%s'", c);
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

/* A string attribute: fixed-length, or variable-length past
 * H5STORE_FIXED_STRING_MAX bytes, since HDF5 keeps a fixed-length value in
 * the object header, which holds at most 64 KiB; a variable-length one
 * keeps its bytes on the file's heap, so a text of any length is written
 * (every reader accepts both: docs/schema.md). */
static herr_t write_str_attr(hid_t obj, const char *key, const char *value)
{
    size_t len = strlen(value);
    hid_t t = len > H5STORE_FIXED_STRING_MAX ? H5Tcopy(H5T_C_S1) : h5store_str_type(len);
    if (t < 0)
        return -1;
    herr_t rc = -1;
    if (len <= H5STORE_FIXED_STRING_MAX)
        rc = write_attr(obj, key, t, t, value);
    else if (H5Tset_size(t, H5T_VARIABLE) >= 0 && H5Tset_cset(t, H5T_CSET_UTF8) >= 0)
        rc = write_attr(obj, key, t, t, &value); /* a variable-length value is written through its pointer */
    H5Tclose(t);
    return rc;
}

static int group_attr(struct h5store *s, const char *group, const char *key, hid_t ftype,
                      hid_t mtype, const void *value, const char *str_value)
{
    h5store_silence_hdf5();
    if (!s)
        return error_set(ST_INTERNAL, "h5store: attribute written to a closed store");
    if (!group || !group[0] || !key || !key[0]) {
        s->failed = 1;
        return error_set(ST_INTERNAL, "%s: attribute needs a group and a key", s->path);
    }
    if (s->failed)
        return error_set(ST_INTERNAL, "%s: not written: an earlier write to it failed", s->path);
    hid_t g;
    int rc = ensure_room(s, (str_value ? strlen(str_value) : 8) + 4096);
    if (rc == ST_OK)
        rc = group_at(s, group, &g);
    if (rc == ST_OK) {
        herr_t w = str_value ? write_str_attr(g, key, str_value)
                             : write_attr(g, key, ftype, mtype, value);
        if (w < 0)
            rc = h5store_fail(ST_INTERNAL, s->path, group, "cannot write attribute %s", key);
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

/* The zlib CRC-32 of a tensor's bytes as stored (little-endian, C order:
 * host memory on the little-endian hosts the harness runs on). */
static long long tensor_crc32(const struct host_tensor *t)
{
    const unsigned char *p = t->data;
    size_t left = host_tensor_bytes(t);
    uLong crc = crc32(0L, Z_NULL, 0);
    while (left > 0) {
        uInt chunk = left > (1u << 30) ? (1u << 30) : (uInt)left;
        crc = crc32(crc, p, chunk);
        p += chunk;
        left -= chunk;
    }
    return (long long)crc;
}

/* crc >= 0: also written as the dataset's int64 "crc32" attribute. */
static int write_tensor(struct h5store *s, const char *path, const struct host_tensor *t, long long crc)
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
    int rc = ensure_room(s, host_tensor_bytes(t) + 4096);
    if (rc == ST_OK)
        rc = group_at(s, parent, &g);
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
        rc = h5store_fail(ST_INTERNAL, s->path, path, "cannot create dataspace");
    else if ((ds = H5Dcreate2(g, name, ftype, space, H5P_DEFAULT, s->dcpl, H5P_DEFAULT)) < 0)
        rc = h5store_fail(ST_INTERNAL, s->path, path, "cannot create dataset");
    else if (t->numel > 0 && H5Dwrite(ds, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, t->data) < 0)
        rc = h5store_fail(ST_INTERNAL, s->path, path, "cannot write dataset");
    else if (write_str_attr(ds, "dtype", dtype_name(t->dtype)) < 0)
        rc = h5store_fail(ST_INTERNAL, s->path, path, "cannot write dtype attribute");
    else if (crc >= 0 && write_attr(ds, "crc32", H5T_STD_I64LE, H5T_NATIVE_LLONG, &crc) < 0)
        rc = h5store_fail(ST_INTERNAL, s->path, path, "cannot write crc32 attribute");
    if (ds >= 0)
        H5Dclose(ds);
    if (space >= 0)
        H5Sclose(space);
    H5Gclose(g);
    return rc;
}

int h5store_write_tensor(struct h5store *s, const char *path, const struct host_tensor *t)
{
    h5store_silence_hdf5();
    if (!s)
        return error_set(ST_INTERNAL, "h5store: tensor written to a closed store");
    if (s->failed)
        return error_set(ST_INTERNAL, "%s: not written: an earlier write to it failed", s->path);
    int rc = write_tensor(s, path, t, -1);
    if (rc != ST_OK)
        s->failed = 1;
    return rc;
}

/* "/a/b/name" as the group "/a/b" (created) and the name in it. */
static int split_parent(struct h5store *s, const char *path, hid_t *group, const char **name)
{
    const char *slash = strrchr(path, '/');
    if (!slash || !slash[1])
        return error_set(ST_INTERNAL, "%s: %s: not a dataset path", s->path, path);
    char parent[RUN_PATH_MAX + 160];
    snprintf(parent, sizeof parent, "%.*s", slash == path ? 1 : (int)(slash - path), path);
    *name = slash + 1;
    return group_at(s, parent, group);
}

/* 1 when the dataset at `ref` holds t exactly: same dtype attribute, shape,
 * crc32 and then bytes (compared only when the checksums agree, holding one
 * tensor); 0 when not, or when there is no such dataset. */
static int holds_same(struct h5store *s, const char *ref, const struct host_tensor *t, long long crc, hid_t *out)
{
    *out = H5I_INVALID_HID;
    if (!h5store_path_exists(s->file, ref))
        return 0;
    H5O_info_t info;
    if (H5Oget_info_by_name(s->file, ref, &info, H5P_DEFAULT) < 0 || info.type != H5O_TYPE_DATASET)
        return 0;
    hid_t ds = H5Dopen2(s->file, ref, H5P_DEFAULT);
    if (ds < 0)
        return 0;
    long long ref_crc = -1;
    char dt[32] = "";
    if (H5Aexists(ds, "crc32") > 0) {
        hid_t a = H5Aopen(ds, "crc32", H5P_DEFAULT);
        if (a < 0 || H5Aread(a, H5T_NATIVE_LLONG, &ref_crc) < 0)
            ref_crc = -1;
        if (a >= 0)
            H5Aclose(a);
    }
    if (H5Aexists(ds, "dtype") > 0) {
        hid_t a = H5Aopen(ds, "dtype", H5P_DEFAULT);
        if (a < 0 || h5store_attr_string(a, dt, sizeof dt) < 0)
            dt[0] = '\0';
        if (a >= 0)
            H5Aclose(a);
    }
    int same = ref_crc == crc && strcmp(dt, dtype_name(t->dtype)) == 0;
    hid_t space = same ? H5Dget_space(ds) : H5I_INVALID_HID;
    if (same) {
        hsize_t dims[HOST_TENSOR_MAX_DIMS];
        int ndim = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
        same = ndim == t->ndim && (ndim == 0 || H5Sget_simple_extent_dims(space, dims, NULL) == ndim);
        for (int i = 0; same && i < ndim; i++)
            same = dims[i] == (hsize_t)t->shape[i];
    }
    hid_t ftype, mtype;
    if (same && t->numel > 0 && dtype_types(s, t->dtype, &ftype, &mtype) == 0) {
        void *buf = malloc(host_tensor_bytes(t));
        same = buf && H5Dread(ds, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0 &&
               memcmp(buf, t->data, host_tensor_bytes(t)) == 0;
        free(buf);
    }
    if (space >= 0)
        H5Sclose(space);
    if (!same) {
        H5Dclose(ds);
        return 0;
    }
    *out = ds;
    return 1;
}

static int write_run_tensor(struct h5store *s, const char *run, const char *reference, const char *path,
                            const struct host_tensor *t, int *linked)
{
    char full[RUN_PATH_MAX + 160], ref[RUN_PATH_MAX + 160];
    if (linked)
        *linked = 0;
    if (!t || (t->numel > 0 && !t->data))
        return error_set(ST_INTERNAL, "%s: /runs/%s/%s: malformed host tensor", s->path, run, path);
    snprintf(full, sizeof full, "/runs/%s/%s", run, path);
    long long crc = tensor_crc32(t);
    hid_t ds = H5I_INVALID_HID;
    if (reference && reference[0] && strcmp(reference, run) != 0) {
        snprintf(ref, sizeof ref, "/runs/%s/%s", reference, path);
        holds_same(s, ref, t, crc, &ds);
        h5store_silence_hdf5();
    }
    if (ds < 0)
        return write_tensor(s, full, t, crc);
    hid_t g = H5I_INVALID_HID;
    const char *name = NULL;
    int rc = ensure_room(s, 4096);
    if (rc == ST_OK)
        rc = split_parent(s, full, &g, &name);
    if (rc == ST_OK) {
        if (H5Lexists(g, name, H5P_DEFAULT) > 0)
            rc = error_set(ST_INTERNAL, "%s: %s: already written", s->path, full);
        else if (H5Olink(ds, g, name, H5P_DEFAULT, H5P_DEFAULT) < 0)
            rc = h5store_fail(ST_INTERNAL, s->path, full, "cannot link it to %s", ref);
        else if (linked)
            *linked = 1;
        H5Gclose(g);
    }
    H5Dclose(ds);
    return rc;
}

int h5store_write_run_tensor(struct h5store *s, const char *run, const char *reference, const char *path,
                             const struct host_tensor *t, int *linked)
{
    h5store_silence_hdf5();
    if (!s)
        return error_set(ST_INTERNAL, "h5store: tensor written to a closed store");
    if (s->failed)
        return error_set(ST_INTERNAL, "%s: not written: an earlier write to it failed", s->path);
    if (!run || !run[0] || strchr(run, '/') || !path || !path[0])
        return error_set(ST_INTERNAL, "%s: a run tensor needs a run name without '/' and a path", s->path);
    int rc = write_run_tensor(s, run, reference, path, t, linked);
    if (rc != ST_OK)
        s->failed = 1;
    return rc;
}

int h5store_flush(struct h5store *s)
{
    h5store_silence_hdf5();
    if (!s || s->failed)
        return error_set(ST_INTERNAL, "%s: not flushed: an earlier write to it failed", s ? s->path : "h5store");
    int rc = ensure_room(s, 0);
    if (rc == ST_OK && H5Fflush(s->file, H5F_SCOPE_GLOBAL) < 0) {
        s->failed = 1;
        rc = h5store_fail(ST_INTERNAL, s->path, NULL, "cannot flush the file");
    }
    return rc;
}

const char *h5store_temp_path(const struct h5store *s) { return s ? s->tmp : NULL; }

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
    char reference[80];
    run_record_reference(r, reference, sizeof reference);
    /* Tensors already streamed into the file (no data in the record) are
     * not written again. */
    for (int i = 0; i < r->n && rc == ST_OK; i++)
        if (!r->items[i].stored)
            rc = write_run_tensor(s, r->name, reference, r->items[i].path, &r->items[i].t, NULL);
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
         * 1.04858e+06; everything else as float64. Readers take both. A
         * time (a key ending in _ms) is always float64, also when it is 0
         * (a baseline recomputes nothing): one attribute keeps one type in
         * every run, so h5diff compares the runs. */
        double v = r->attrs[i].value;
        long long whole = 0;
        size_t key_len = strlen(key);
        int is_time = key_len > 3 && strcmp(key + key_len - 3, "_ms") == 0;
        int is_whole = !is_time && isfinite(v) && fabs(v) <= 9007199254740992.0 && v == trunc(v) &&
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
        {"outcome", r->outcome}, {"message", text_str(&r->message)}, {"warning", text_str(&r->warning)},
        {"baselines", r->baselines}, {"twin_of", r->twin_of}, {"noise_cause", text_str(&r->noise_cause)},
        {"op_log", text_str(&r->op_log)}, {"memory_statement", text_str(&r->memory_statement)},
        {"memory_still_held", text_str(&r->memory_still_held)}, {"memory_kept", text_str(&r->memory_kept)},
        {"role", r->role}, {"not_observable", text_str(&r->not_observable)},
        {"class_patches", text_str(&r->class_patches)}, {"memory_extra", text_str(&r->memory_extra)},
        {"memory_declared", text_str(&r->memory_declared)}, {"memory_state", text_str(&r->memory_state)}};
    snprintf(full, cap, "/runs/%s", r->name);
    for (size_t i = 0; i < sizeof texts / sizeof *texts && rc == ST_OK; i++)
        if (texts[i].value[0])
            rc = group_attr(s, full, texts[i].key, H5I_INVALID_HID, H5I_INVALID_HID, NULL, texts[i].value);
    free(full);
    return rc;
}

int h5store_write_run(struct h5store *s, const struct run_record *r)
{
    h5store_silence_hdf5();
    if (!s)
        return error_set(ST_INTERNAL, "h5store: run written to a closed store");
    int rc = write_run(s, r);
    if (rc != ST_OK)
        s->failed = 1;
    return rc;
}

int h5store_commit(struct h5store *s)
{
    h5store_silence_hdf5();
    if (!s)
        return error_set(ST_INTERNAL, "h5store: commit of a closed store");
    int rc = ST_OK;
    if (s->failed)
        rc = error_set(ST_INTERNAL, "%s: not written: an earlier write to it failed", s->path);
    else
        rc = ensure_room(s, 0); /* the metadata H5Fclose writes */
    /* A store that failed is closed only while its room holds: HDF5 gets no
     * write the disk can refuse. */
    herr_t closed = store_close(s);
    if (rc == ST_OK && closed < 0)
        rc = h5store_fail(ST_INTERNAL, s->path, NULL, "closing the file failed");
    if (rc == ST_OK) {
        disk_room_release(&s->room);
        if (fsync(s->tmp_fd) != 0)
            rc = error_set(ST_INTERNAL, "%s: cannot write: %s", s->tmp, strerror(errno));
    }
    if (close(s->tmp_fd) != 0 && rc == ST_OK)
        rc = error_set(ST_INTERNAL, "%s: cannot write: %s", s->tmp, strerror(errno));
    s->tmp_fd = -1;
    if (rc == ST_OK)
        rc = temp_file_publish(s->tmp, s->path);
    else
        unlink(s->tmp);
    store_free(s);
    return rc;
}

void h5store_abort(struct h5store *s)
{
    if (!s)
        return;
    h5store_silence_hdf5();
    store_close(s);
    unlink(s->tmp);
    store_free(s);
}
