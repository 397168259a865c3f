/* h5store_open: what every reader of h5store.h starts with. A report is
 * opened only after checks that give each kind of bad input (missing, not a
 * file, not HDF5, truncated, another schema version) its own message; then
 * paths, string attributes and attributes with their type are read safely. */
#define _POSIX_C_SOURCE 200809L

#include "h5store.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <hdf5.h>

#include "error.h"
#include "h5store_internal.h"

/* 1 if every component of an absolute path exists. H5Lexists answers an
 * error, not 0, when a parent is missing, hence the walk. */
int h5store_path_exists(hid_t file, const char *path)
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
int h5store_attr_string_alloc(hid_t attr, char **out)
{
    *out = NULL;
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
        *out = strdup(v ? v : "");
        H5free_memory(v);
        rc = *out ? 1 : -3;
    } else {
        size_t n = H5Tget_size(ftype);
        char *tmp = malloc(n + 1);
        if (!tmp) {
            rc = -3;
            goto done;
        }
        if (H5Tset_size(mtype, n + 1) < 0 || H5Tset_strpad(mtype, H5T_STR_NULLTERM) < 0 ||
            H5Aread(attr, mtype, tmp) < 0) {
            free(tmp);
            goto done;
        }
        tmp[n] = '\0';
        *out = tmp;
        rc = 1;
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

int h5store_attr_string(hid_t attr, char *buf, size_t len)
{
    char *value;
    int rc = h5store_attr_string_alloc(attr, &value);
    if (rc == 1) {
        rc = strlen(value) < len ? 1 : -2;
        if (rc == 1)
            strcpy(buf, value);
    }
    free(value);
    return rc == -3 ? -1 : rc;
}

/* Opens a report for reading after the checks that give each kind of bad
 * input its own message: exists, is a file, is HDF5, opens (a truncated
 * file fails here), has schema_version == H5STORE_SCHEMA_VERSION. */
int h5store_open_report(const char *path, hid_t *out)
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
        return h5store_fail(ST_INPUT, path, NULL, "cannot read");
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0)
        return h5store_fail(ST_INPUT, path, NULL, "truncated or damaged HDF5 file");

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
        rc = h5store_fail(ST_INPUT, path, "/", "cannot read attribute schema_version");
    } else if (H5Tget_class(t) != H5T_INTEGER || H5Sget_simple_extent_npoints(sp) != 1) {
        rc = error_set(ST_INPUT, "%s: /: schema_version is not an integer", path);
    } else if (H5Aread(a, H5T_NATIVE_LLONG, &version) < 0) {
        rc = h5store_fail(ST_INPUT, path, "/", "cannot read attribute schema_version");
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
    struct h5report *rep;
    int rc = h5report_open(&rep, path);
    h5report_close(rep);
    return rc;
}

int h5report_open(struct h5report **out, const char *path)
{
    h5store_silence_hdf5();
    *out = NULL;
    hid_t f;
    int rc = h5store_open_report(path, &f);
    if (rc != ST_OK)
        return rc;
    struct h5report *rep = calloc(1, sizeof *rep);
    char *copy = strdup(path);
    if (!rep || !copy) {
        free(rep);
        free(copy);
        H5Fclose(f);
        return error_set(ST_INTERNAL, "%s: out of memory opening the report", path);
    }
    rep->file = f;
    rep->path = copy;
    /* The identity of what was opened (its descriptor, under the default
     * POSIX driver), not of whatever the path names later. */
    struct stat st;
    void *handle = NULL;
    int have = H5Fget_vfd_handle(f, H5P_DEFAULT, &handle) >= 0 && handle && fstat(*(int *)handle, &st) == 0;
    if (!have)
        have = stat(path, &st) == 0;
    if (have) {
        rep->dev = (unsigned long long)st.st_dev;
        rep->ino = (unsigned long long)st.st_ino;
    }
    *out = rep;
    return ST_OK;
}

void h5report_close(struct h5report *rep)
{
    if (!rep)
        return;
    H5Fclose(rep->file); /* the file stays open while a run holds it */
    free(rep->path);
    free(rep);
}

const char *h5report_path(const struct h5report *rep) { return rep->path; }

int h5report_has_group(struct h5report *rep, const char *group)
{
    h5store_silence_hdf5();
    return group && h5store_path_exists(rep->file, group);
}

int h5store_has_group(const char *path, const char *group)
{
    struct h5report *rep;
    if (h5report_open(&rep, path) != ST_OK) {
        error_clear();
        return 0;
    }
    int has = h5report_has_group(rep, group);
    h5report_close(rep);
    return has;
}
