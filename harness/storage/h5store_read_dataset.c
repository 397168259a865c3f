/* h5store_read_dataset: one dataset of a report loaded as a host tensor.
 * The element type and the "dtype" attribute decide the harness dtype (and
 * must agree); a shape larger than the file could hold, or data kept in
 * another file, is refused before anything is allocated. A dataset with a
 * "crc32" attribute is checked against it on every load (the CRC-32 is
 * taken from the bytes the load already read), so corrupt data is never
 * compared as if it were a run's. */
#define _POSIX_C_SOURCE 200809L

#include "h5store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hdf5.h>
#include <zlib.h>

#include "error.h"
#include "h5store_internal.h"

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
                return h5store_fail(ST_INPUT, file, where, "unreadable float type");
            if (esize == 5 && msize == 10)
                have = DT_F16, *mtype = h5store_half_type(H5T_NATIVE_FLOAT);
            else if (esize == 8 && msize == 7)
                have = DT_BF16, *mtype = h5store_bf16_float_type(H5T_NATIVE_FLOAT);
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
        return h5store_fail(ST_INPUT, file, where, "cannot build a memory type");
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
    int got = a >= 0 ? h5store_attr_string(a, buf, sizeof buf) : -1;
    int rc = ST_OK;
    if (got < 0 && got != -2)
        rc = h5store_fail(ST_INPUT, file, where, "unreadable dtype attribute");
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
        return h5store_fail(ST_INPUT, file, where, "unreadable storage layout");
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
        return h5store_fail(ST_INPUT, file, where, "cannot get the file size");
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

/* zlib's CRC-32 continued over n bytes, in pieces its uInt can take. */
static unsigned long crc32_bytes(unsigned long crc, const unsigned char *p, size_t n)
{
    while (n > 0) {
        uInt piece = n > (1u << 30) ? (1u << 30) : (uInt)n;
        crc = crc32(crc, p, piece);
        p += piece;
        n -= piece;
    }
    return crc;
}

int h5store_checksum_mismatch(const char *file, const char *where, long long stored, unsigned long data)
{
    return error_set(ST_INPUT, "%s: %s: checksum mismatch (stored crc32 %lld, data %lu): the file is corrupt", file,
                     where, stored, data);
}

int h5store_check_stored_crc32(hid_t ds, const char *file, const char *where, long long crc)
{
    hid_t ftype = H5Dget_type(ds), mtype = ftype >= 0 ? H5Tcopy(ftype) : H5I_INVALID_HID;
    hid_t fspace = H5Dget_space(ds), mspace = H5I_INVALID_HID;
    int ndim = fspace >= 0 ? H5Sget_simple_extent_ndims(fspace) : -1;
    hsize_t dims[H5S_MAX_RANK] = {0}, start[H5S_MAX_RANK] = {0}, count[H5S_MAX_RANK] = {0};
    size_t row = mtype >= 0 ? H5Tget_size(mtype) : 0;
    int rc = ST_OK;
    unsigned char *buf = NULL;
    unsigned long got = crc32(0L, Z_NULL, 0);
    if (ftype < 0 || mtype < 0 || fspace < 0 || ndim < 0 || ndim > H5S_MAX_RANK || row == 0 ||
        (ndim > 0 && H5Sget_simple_extent_dims(fspace, dims, NULL) < 0))
        rc = h5store_fail(ST_INPUT, file, where, "unreadable dataset");
    /* Whole rows of the first dimension, as many as fit a block. */
    for (int i = 1; rc == ST_OK && i < ndim; i++)
        row *= (size_t)dims[i];
    hsize_t rows = 0, per_block = 1; /* no element (a 0 in the shape): nothing to read */
    if (rc == ST_OK && row > 0) {
        rows = ndim > 0 ? dims[0] : 1;
        per_block = row >= H5STORE_CHECKSUM_BLOCK ? 1 : H5STORE_CHECKSUM_BLOCK / row;
        if (per_block > rows)
            per_block = rows;
    }
    if (rc == ST_OK && rows > 0 && !(buf = malloc((size_t)per_block * row)))
        rc = error_set(ST_RUN, "%s: %s: out of memory checking the checksum", file, where);
    for (hsize_t r0 = 0; rc == ST_OK && r0 < rows; r0 += per_block) {
        hsize_t n = rows - r0 < per_block ? rows - r0 : per_block;
        herr_t read;
        if (ndim == 0) {
            read = H5Dread(ds, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf);
        } else {
            start[0] = r0;
            count[0] = n;
            for (int i = 1; i < ndim; i++)
                count[i] = dims[i];
            mspace = H5Screate_simple(ndim, count, NULL);
            read = mspace < 0 || H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, NULL, count, NULL) < 0
                       ? -1
                       : H5Dread(ds, mtype, mspace, fspace, H5P_DEFAULT, buf);
            if (mspace >= 0)
                H5Sclose(mspace);
        }
        if (read < 0)
            rc = h5store_fail(ST_INPUT, file, where, "unreadable dataset");
        else
            got = crc32_bytes(got, buf, (size_t)n * row);
    }
    free(buf);
    if (fspace >= 0)
        H5Sclose(fspace);
    if (mtype >= 0)
        H5Tclose(mtype);
    if (ftype >= 0)
        H5Tclose(ftype);
    if (rc == ST_OK && (long long)got != crc)
        rc = h5store_checksum_mismatch(file, where, crc, got);
    return rc;
}

/* After a load: the CRC-32 of the dataset's stored bytes against its crc32
 * attribute. Where the load read the elements as stored (the memory type
 * is the file type: every type the harness and numpy write on a
 * little-endian host), the loaded bytes are the stored ones; otherwise (an
 * integer widened to int64, a big-endian file) the stored bytes are read
 * again, a block at a time. */
static int check_loaded_crc32(hid_t ds, hid_t ftype, hid_t mtype, const struct host_tensor *t, const char *file,
                              const char *where)
{
    long long stored;
    int rc = h5store_read_crc32(ds, file, where, &stored);
    if (rc != ST_OK || stored < 0)
        return rc;
    if (H5Tequal(mtype, ftype) <= 0)
        return h5store_check_stored_crc32(ds, file, where, stored);
    unsigned long got = crc32_bytes(crc32(0L, Z_NULL, 0), t->data, host_tensor_bytes(t));
    return (long long)got == stored ? ST_OK : h5store_checksum_mismatch(file, where, stored, got);
}

/* What load_dataset does with a dataset's bytes. */
enum load_mode {
    DESCRIBE_ONLY,      /* dtype and shape, no data */
    LOAD_AND_VERIFY,    /* the data, its crc32 checked */
    LOAD_VERIFIED_ONCE, /* the data of an object whose crc32 a load of this process already checked */
};

static int load_dataset(hid_t ds, const char *file, const char *where, struct host_tensor *out, uint64_t *budget,
                        enum load_mode mode);

int h5store_load_dataset(hid_t ds, const char *file, const char *where, struct host_tensor *out,
                         uint64_t *budget)
{
    return load_dataset(ds, file, where, out, budget, LOAD_AND_VERIFY);
}

int h5store_load_verified_dataset(hid_t ds, const char *file, const char *where, struct host_tensor *out,
                                  uint64_t *budget)
{
    return load_dataset(ds, file, where, out, budget, LOAD_VERIFIED_ONCE);
}

int h5store_describe_dataset(hid_t ds, const char *file, const char *where, struct host_tensor *out)
{
    return load_dataset(ds, file, where, out, NULL, DESCRIBE_ONLY);
}

/* Loads an open dataset into out (allocated here), or with_data 0 only
 * checks it and fills out's dtype and shape (data NULL). `where` is its
 * absolute path, for messages. */
static int load_dataset(hid_t ds, const char *file, const char *where, struct host_tensor *out, uint64_t *budget,
                        enum load_mode mode)
{
    int with_data = mode != DESCRIBE_ONLY;
    memset(out, 0, sizeof *out);
    int want;
    int rc = dtype_attr(ds, file, where, &want);
    if (rc != ST_OK)
        return rc;
    hid_t ftype = H5Dget_type(ds), space = H5I_INVALID_HID, mtype = H5I_INVALID_HID;
    enum dtype dt = DT_F32;
    if (ftype < 0)
        return h5store_fail(ST_INPUT, file, where, "unreadable datatype");
    rc = read_plan(ftype, want, file, where, &dt, &mtype);
    if (rc == ST_OK && (space = H5Dget_space(ds)) < 0)
        rc = h5store_fail(ST_INPUT, file, where, "unreadable dataspace");
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
            rc = h5store_fail(ST_INPUT, file, where, "unreadable dataspace");
        else
            rc = check_dataset_size(ds, ftype, ndim, dims, file, where);
        if (rc == ST_OK && budget) {
            /* What the whole read may load: one dataset hard-linked many
             * times is loaded as many times. */
            uint64_t bytes = dtype_size(dt);
            for (int i = 0; i < ndim; i++)
                bytes = dims[i] && bytes > UINT64_MAX / dims[i] ? UINT64_MAX : bytes * dims[i];
            if (bytes > *budget)
                rc = error_set(ST_INPUT, "%s: %s: loading its %llu bytes would pass what is left (%llu bytes) of the "
                                         "limit on what one read may load",
                               file, where, (unsigned long long)bytes, (unsigned long long)*budget);
            else
                *budget -= bytes;
        }
        if (rc == ST_OK && !with_data) {
            out->dtype = dt;
            out->ndim = ndim;
            out->numel = 1;
            for (int i = 0; i < ndim; i++) {
                out->shape[i] = (int64_t)dims[i];
                out->numel *= (size_t)dims[i];
            }
        } else if (rc == ST_OK) {
            for (int i = 0; i < ndim; i++)
                shape[i] = (int64_t)dims[i];
            /* Under an address space limit (ulimit -v) the allocation can
             * fail within the budget: say which file and dataset. */
            if ((rc = host_tensor_alloc(out, dt, ndim, shape)))
                error_wrap(rc, "%s: %s", file, where);
        }
        if (rc == ST_OK && with_data && out->numel > 0 &&
            H5Dread(ds, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, out->data) < 0) {
            rc = h5store_fail(ST_INPUT, file, where, "unreadable dataset");
            host_tensor_free(out);
        } else if (rc == ST_OK && mode == LOAD_AND_VERIFY &&
                   (rc = check_loaded_crc32(ds, ftype, mtype, out, file, where))) {
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
    h5store_silence_hdf5();
    memset(out, 0, sizeof *out);
    hid_t f;
    int rc = h5store_open_report(path, &f);
    if (rc != ST_OK)
        return rc;
    hid_t ds = H5I_INVALID_HID;
    if (!dataset || !dataset[0] || !h5store_path_exists(f, dataset))
        rc = error_set(ST_INPUT, "%s: %s: dataset missing", path, dataset ? dataset : "");
    else if ((ds = H5Dopen2(f, dataset, H5P_DEFAULT)) < 0)
        rc = h5store_fail(ST_INPUT, path, dataset, "not a readable dataset");
    else
        rc = h5store_load_dataset(ds, path, dataset, out, NULL);
    if (ds >= 0)
        H5Dclose(ds);
    H5Fclose(f);
    return rc;
}
