/* h5store_hdf5: HDF5's error stack read back as one-line messages, the
 * HDF5 types the schema needs that HDF5 does not predefine (float16 as h5py
 * writes it, bfloat16 as a float, fixed-length UTF-8 strings), and
 * attributes opened with their type and space. It calls HDF5 alone: the
 * other h5store_*.c files build on it, never the other way round. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "h5store_internal.h"

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

int h5store_fail(int code, const char *file, const char *where, const char *fmt, ...)
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

hid_t h5store_half_type(hid_t base) { return make_float_type(base, 10, 5, 10, 15); }
/* bfloat16 as a 2-byte HDF5 float. We never write it (the schema stores
 * bfloat16 as uint16 bit patterns) but read files that chose it. */
hid_t h5store_bf16_float_type(hid_t base) { return make_float_type(base, 7, 8, 7, 127); }

/* A fixed-length, NUL-terminated UTF-8 string of len characters: h5dump
 * prints it as "text", h5py reads it as bytes. */
hid_t h5store_str_type(size_t len)
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

int h5store_object_id(hid_t obj, unsigned char out[16])
{
    memset(out, 0, 16);
#if H5_VERSION_GE(1, 12, 0)
    H5O_info2_t info;
    if (H5Oget_info3(obj, &info, H5O_INFO_BASIC) < 0)
        return -1;
    memcpy(out, &info.token, sizeof info.token < 16 ? sizeof info.token : 16);
#else
    H5O_info_t info;
    if (H5Oget_info2(obj, &info, H5O_INFO_BASIC) < 0)
        return -1;
    memcpy(out, &info.addr, sizeof info.addr);
#endif
    return 0;
}

int h5store_read_crc32(hid_t ds, const char *file, const char *where, long long *crc)
{
    *crc = -1;
    htri_t has = H5Aexists(ds, "crc32");
    if (has == 0)
        return ST_OK;
    if (has < 0)
        return h5store_fail(ST_INPUT, file, where, "unreadable crc32 attribute");
    struct h5store_open_attr o = h5store_attr_open(ds, "crc32");
    long long value = -1;
    int ok = o.type >= 0 && o.space >= 0 && H5Tget_class(o.type) == H5T_INTEGER &&
             H5Sget_simple_extent_npoints(o.space) == 1 && H5Aread(o.a, H5T_NATIVE_LLONG, &value) >= 0;
    h5store_attr_close(&o);
    if (!ok || value < 0 || value > 0xffffffffLL)
        return error_set(ST_INPUT, "%s: %s: crc32 attribute is not one integer 0..4294967295", file, where);
    *crc = value;
    return ST_OK;
}

/* ---- attributes opened with their type and space (h5store_internal.h) ---- */

struct h5store_open_attr h5store_attr_open(hid_t loc, const char *name)
{
    struct h5store_open_attr o;
    o.a = H5Aopen(loc, name, H5P_DEFAULT);
    o.type = o.a >= 0 ? H5Aget_type(o.a) : H5I_INVALID_HID;
    o.space = o.a >= 0 ? H5Aget_space(o.a) : H5I_INVALID_HID;
    return o;
}

void h5store_attr_close(struct h5store_open_attr *o)
{
    if (o->space >= 0)
        H5Sclose(o->space);
    if (o->type >= 0)
        H5Tclose(o->type);
    if (o->a >= 0)
        H5Aclose(o->a);
}
