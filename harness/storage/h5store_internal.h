/* h5store_internal: what the h5store_*.c files share and callers of
 * h5store.h never see: HDF5's error stack turned into one-line messages, the
 * float16/bfloat16/string HDF5 types, and the checked opening and reading of
 * a report that every reader starts with. Internal to harness/storage/. */
#ifndef CKPT_H5STORE_INTERNAL_H
#define CKPT_H5STORE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <hdf5.h>

#include "host_tensor.h"

/* HDF5 prints its error stack to stderr by default. We switch that off at
 * the top of every entry point rather than once behind a global flag: the
 * call is cheap, it needs no mutable global, and in a thread-safe HDF5
 * build the setting is per thread, so a once-flag would leave other
 * threads printing. The error stack itself is still recorded; h5store_fail()
 * reads it. */
static inline void h5store_silence_hdf5(void) { H5Eset_auto2(H5E_DEFAULT, NULL, NULL); }

/* error_set() for a failed HDF5 call: "file: where: what (reason)", the
 * reason being HDF5's innermost error description. `where` may be NULL for
 * file-level failures. Call it before closing anything: a cleanup call
 * clears the error stack it reads. */
int h5store_fail(int code, const char *file, const char *where, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* New HDF5 types (the caller closes them; H5I_INVALID_HID on failure):
 * IEEE half as h5py defines float16, bfloat16 as a 2-byte float (read only:
 * the schema stores bfloat16 as uint16 bit patterns), both built from a
 * 4-byte float `base`; and a fixed-length NUL-terminated UTF-8 string of
 * len characters. */
hid_t h5store_half_type(hid_t base);
hid_t h5store_bf16_float_type(hid_t base);
hid_t h5store_str_type(size_t len);

/* Opens a report for reading after the checks that give each kind of bad
 * input its own ST_INPUT message: exists, is a file, is HDF5, opens, has
 * schema_version == H5STORE_SCHEMA_VERSION. */
int h5store_open_report(const char *path, hid_t *out);
/* An open report (h5store.h): the file id, the path it was opened by and
 * the file's identity (st_dev, st_ino) when it was opened. */
struct h5report {
    hid_t file;
    char *path;
    unsigned long long dev, ino;
};
/* 1 if every component of an absolute path exists in the file. */
int h5store_path_exists(hid_t file, const char *path);
/* Reads a scalar string attribute (fixed- or variable-length) into buf.
 * Returns 1 on success, 0 if it is not a single string, -1 on HDF5
 * failure, -2 if it does not fit in buf. */
int h5store_attr_string(hid_t attr, char *buf, size_t len);
/* The same at any length: *out (malloc'd, the caller frees it; NULL unless
 * 1) holds the whole string. 1, 0 and -1 as above; -3 out of memory. */
int h5store_attr_string_alloc(hid_t attr, char **out);

/* An attribute opened with its type and dataspace; any of the three is
 * negative when it could not be had. h5store_attr_close closes what opened. */
struct h5store_open_attr {
    hid_t a, type, space;
};
struct h5store_open_attr h5store_attr_open(hid_t loc, const char *name);
void h5store_attr_close(struct h5store_open_attr *o);

/* Loads an open dataset into out (allocated here), checking its type, its
 * "dtype" attribute and that its shape fits the file; `where` is its
 * absolute path, for messages. With a budget, refuses a dataset larger than
 * *budget and takes what it loads off it. */
int h5store_load_dataset(hid_t ds, const char *file, const char *where, struct host_tensor *out,
                         uint64_t *budget);
/* The same, for an object whose crc32 a load of this process already
 * checked (checked_objects): the bytes are not checksummed again. */
int h5store_load_verified_dataset(hid_t ds, const char *file, const char *where, struct host_tensor *out,
                                  uint64_t *budget);
/* The same checks without loading: out gets dtype, ndim, shape and numel,
 * and no data. */
int h5store_describe_dataset(hid_t ds, const char *file, const char *where, struct host_tensor *out);
/* The identity of the object behind an open handle: equal for two paths
 * that reach one object (hard links), within one file. */
int h5store_object_id(hid_t obj, unsigned char out[16]);
/* ST_INPUT for a link that is not a hard link (external, soft, user-defined)
 * at `where`, where `expected` ("a dataset or group") should be: a soft
 * link is named with its target. */
int h5store_link_not_hard(hid_t group, const char *name, const H5L_info_t *info, const char *file,
                          const char *where, const char *expected);
/* The "crc32" attribute of a dataset into *crc, -1 when it has none;
 * ST_INPUT naming file and where when it is not one integer 0..2^32-1. */
int h5store_read_crc32(hid_t ds, const char *file, const char *where, long long *crc);
/* Reads an open dataset's elements as stored (its own file type, no
 * conversion) a block at a time and checks their CRC-32 against crc:
 * ST_INPUT "FILE: WHERE: checksum mismatch ..." when they differ. Holds
 * one block (at most H5STORE_CHECKSUM_BLOCK bytes, or one row), never the
 * dataset. */
#define H5STORE_CHECKSUM_BLOCK (16u << 20)
int h5store_check_stored_crc32(hid_t ds, const char *file, const char *where, long long crc);
/* The one-line error for data whose CRC-32 is not the stored one. */
int h5store_checksum_mismatch(const char *file, const char *where, long long stored, unsigned long data);

#endif
