/* h5store: round trips (bitwise, per dtype), natural order, atomic
 * publish (commit/abort), and one-line ST_INPUT errors for bad files. Each
 * test runs in its own mkdtemp directory. Files "from another framework"
 * are written with the raw HDF5 C API the way h5py writes them. */
#define _XOPEN_SOURCE 700

#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <hdf5.h>

#include "dtype.h"
#include "error.h"
#include "h5store.h"
#include "host_tensor.h"
#include "run_record.h"

struct fixture {
    char dir[512];
    char path[600]; /* <dir>/report.h5 */
    char tmp[610];  /* <dir>/report.h5.tmp: a name to write to, not the store's temporary */
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    const char *base = getenv("TMPDIR");
    snprintf(f->dir, sizeof f->dir, "%s/test_h5store.XXXXXX", base && base[0] ? base : "/tmp");
    if (!mkdtemp(f->dir)) {
        free(f);
        return -1;
    }
    snprintf(f->path, sizeof f->path, "%s/report.h5", f->dir);
    snprintf(f->tmp, sizeof f->tmp, "%s.tmp", f->path);
    error_clear();
    *state = f;
    return 0;
}

static int remove_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    if (flag == FTW_DP)
        chmod(p, 0700);
    return remove(p);
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    chmod(f->dir, 0700);
    nftw(f->dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(f);
    return 0;
}

/* ---- helpers -------------------------------------------------------- */

static int exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

/* Whether a temporary of the report exists: "<path>.XXXXXX.tmp" (temp_file.h). */
static int temp_exists(const struct fixture *f)
{
    char pattern[700];
    glob_t g;
    snprintf(pattern, sizeof pattern, "%s.??????.tmp", f->path);
    int found = glob(pattern, 0, NULL, &g) == 0 && g.gl_pathc > 0;
    globfree(&g);
    return found;
}

static void assert_message_has(const char *needle)
{
    const char *m = error_message();
    if (!strstr(m, needle))
        fail_msg("message \"%s\" does not contain \"%s\"", m, needle);
    assert_null(strchr(m, '\n'));
}

/* A tensor whose bytes are a fixed pseudo-random pattern: any bit pattern,
 * NaNs included, must come back unchanged. */
static struct host_tensor pattern_tensor(enum dtype d, int ndim, const int64_t *shape, unsigned seed)
{
    struct host_tensor t;
    assert_int_equal(host_tensor_alloc(&t, d, ndim, shape), ST_OK);
    unsigned char *p = t.data;
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < host_tensor_bytes(&t); i++) {
        x = x * 1664525u + 1013904223u;
        p[i] = (unsigned char)(x >> 24);
    }
    return t;
}

static struct host_tensor u16_tensor(enum dtype d, const uint16_t *bits, int n)
{
    struct host_tensor t;
    int64_t shape[1] = {n};
    assert_int_equal(host_tensor_alloc(&t, d, 1, shape), ST_OK);
    memcpy(t.data, bits, (size_t)n * 2);
    return t;
}

static void assert_same_tensor(const struct host_tensor *a, const struct host_tensor *b)
{
    assert_int_equal(a->dtype, b->dtype);
    assert_int_equal(a->ndim, b->ndim);
    for (int i = 0; i < a->ndim; i++)
        assert_int_equal(a->shape[i], b->shape[i]);
    assert_int_equal(a->numel, b->numel);
    assert_memory_equal(a->data, b->data, host_tensor_bytes(a));
}

static struct h5store *begin(const struct fixture *f)
{
    struct h5store *s = NULL;
    assert_int_equal(h5store_create(&s, f->path), ST_OK);
    assert_non_null(s);
    assert_int_equal(h5store_attr_int(s, "/", "schema_version", H5STORE_SCHEMA_VERSION), ST_OK);
    return s;
}

/* Writes t at dataset, commits, reads it back and compares bitwise. */
static void round_trip(const struct fixture *f, const char *dataset, struct host_tensor *t)
{
    struct h5store *s = begin(f);
    assert_int_equal(h5store_write_tensor(s, dataset, t), ST_OK);
    assert_int_equal(h5store_commit(s), ST_OK);
    struct host_tensor back;
    assert_int_equal(h5store_read_tensor(f->path, dataset, &back), ST_OK);
    assert_same_tensor(t, &back);
    host_tensor_free(&back);
    host_tensor_free(t);
}

/* A complete small report: root attributes, inputs, one run. */
static void write_sample(const char *path)
{
    struct h5store *s = NULL;
    assert_int_equal(h5store_create(&s, path), ST_OK);
    assert_int_equal(h5store_attr_int(s, "/", "schema_version", 1), ST_OK);
    assert_int_equal(h5store_attr_str(s, "/", "case", "bias_gelu_bs1"), ST_OK);
    int64_t shape[3] = {2, 3, 4};
    struct host_tensor x = pattern_tensor(DT_F32, 3, shape, 1);
    assert_int_equal(h5store_write_tensor(s, "/inputs/x", &x), ST_OK);
    host_tensor_free(&x);
    struct run_record r;
    run_record_init(&r, "baseline_0");
    struct host_tensor loss = pattern_tensor(DT_F32, 0, NULL, 2);
    assert_int_equal(run_record_add(&r, "steps/1/loss", &loss), ST_OK);
    struct host_tensor g = pattern_tensor(DT_F32, 1, shape + 2, 3);
    assert_int_equal(run_record_add(&r, "steps/1/grads/l0.bias", &g), ST_OK);
    assert_int_equal(run_record_set_attr(&r, "memory.peak_bytes", 4096), ST_OK);
    assert_int_equal(h5store_write_run(s, &r), ST_OK);
    run_record_free(&r);
    assert_int_equal(h5store_commit(s), ST_OK);
}

static void write_bytes(const char *path, const void *data, size_t n)
{
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(data, 1, n, fp), n);
    assert_int_equal(fclose(fp), 0);
}

static unsigned char *read_bytes(const char *path, size_t *n)
{
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    fseek(fp, 0, SEEK_END);
    long len = ftell(fp);
    assert_true(len > 0);
    fseek(fp, 0, SEEK_SET);
    unsigned char *buf = malloc((size_t)len);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)len, fp), (size_t)len);
    fclose(fp);
    *n = (size_t)len;
    return buf;
}

/* ---- writing and round trips ---------------------------------------- */

static void test_commit_publishes_final_file_and_removes_tmp(void **state)
{
    struct fixture *f = *state;
    struct h5store *s = begin(f);
    assert_true(temp_exists(f));
    assert_false(exists(f->path));
    assert_int_equal(h5store_commit(s), ST_OK);
    assert_false(temp_exists(f));
    assert_true(exists(f->path));
    assert_int_equal(h5store_check_file(f->path), ST_OK);
}

static void test_float32_tensor_round_trips_bitwise(void **state)
{
    int64_t shape[2] = {3, 5};
    struct host_tensor t = pattern_tensor(DT_F32, 2, shape, 7);
    ((float *)t.data)[0] = -0.0f;
    round_trip(*state, "/params_init/l0.weight", &t);
}

static void test_float16_tensor_round_trips_bitwise(void **state)
{
    /* 0, -0, smallest subnormal, 1, max, +inf, -inf, NaN with payload,
     * negative NaN with another payload. */
    const uint16_t bits[] = {0x0000, 0x8000, 0x0001, 0x3c00, 0x7bff, 0x7c00, 0xfc00, 0x7e01, 0xfd55};
    struct host_tensor t = u16_tensor(DT_F16, bits, (int)(sizeof bits / sizeof bits[0]));
    round_trip(*state, "/runs/r/steps/1/grads/l0.bias", &t);
}

static void test_bfloat16_tensor_round_trips_bitwise(void **state)
{
    const uint16_t bits[] = {0x0000, 0x8000, 0x0001, 0x3f80, 0x7f7f, 0x7f80, 0xff80, 0x7fc1, 0xffab};
    struct host_tensor t = u16_tensor(DT_BF16, bits, (int)(sizeof bits / sizeof bits[0]));
    round_trip(*state, "/runs/r/steps/1/grads/l0.weight", &t);
}

static void test_scalar_round_trips_as_rank0(void **state)
{
    struct fixture *f = *state;
    struct host_tensor t = pattern_tensor(DT_F32, 0, NULL, 11);
    round_trip(f, "/runs/r/steps/1/loss", &t);
    /* And it is an HDF5 scalar, not a 1-element array. */
    hid_t file = H5Fopen(f->path, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t ds = H5Dopen2(file, "/runs/r/steps/1/loss", H5P_DEFAULT);
    hid_t sp = H5Dget_space(ds);
    assert_int_equal(H5Sget_simple_extent_type(sp), H5S_SCALAR);
    H5Sclose(sp);
    H5Dclose(ds);
    H5Fclose(file);
}

static void test_float64_int64_uint8_bool_round_trip(void **state)
{
    struct fixture *f = *state;
    const enum dtype types[] = {DT_F64, DT_I64, DT_U8, DT_BOOL};
    const char *names[] = {"/t/f64", "/t/i64", "/t/u8", "/t/bool"};
    int64_t shape[2] = {4, 3};
    struct host_tensor in[4];
    struct h5store *s = begin(f);
    for (int i = 0; i < 4; i++) {
        in[i] = pattern_tensor(types[i], 2, shape, 20u + (unsigned)i);
        if (types[i] == DT_BOOL)
            for (size_t k = 0; k < in[i].numel; k++)
                ((unsigned char *)in[i].data)[k] &= 1;
        assert_int_equal(h5store_write_tensor(s, names[i], &in[i]), ST_OK);
    }
    assert_int_equal(h5store_commit(s), ST_OK);
    for (int i = 0; i < 4; i++) {
        struct host_tensor back;
        assert_int_equal(h5store_read_tensor(f->path, names[i], &back), ST_OK);
        assert_same_tensor(&in[i], &back);
        host_tensor_free(&back);
        host_tensor_free(&in[i]);
    }
}

static void test_empty_tensor_round_trips(void **state)
{
    int64_t shape[2] = {0, 3};
    struct host_tensor t = pattern_tensor(DT_F32, 2, shape, 1);
    round_trip(*state, "/runs/r/saved/1/fingerprints", &t);
}

static void test_root_string_attributes_read_back(void **state)
{
    struct fixture *f = *state;
    struct h5store *s = begin(f);
    assert_int_equal(h5store_attr_str(s, "/", "case", "bias_gelu_bs1"), ST_OK);
    assert_int_equal(h5store_attr_str(s, "/", "git_rev", ""), ST_OK);
    assert_int_equal(h5store_attr_str(s, "/verdicts/reentrant", "verdict", "PASS"), ST_OK);
    assert_int_equal(h5store_commit(s), ST_OK);
    char buf[64];
    assert_int_equal(h5store_read_attr_str(f->path, "/", "case", buf, sizeof buf), ST_OK);
    assert_string_equal(buf, "bias_gelu_bs1");
    assert_int_equal(h5store_read_attr_str(f->path, "/", "git_rev", buf, sizeof buf), ST_OK);
    assert_string_equal(buf, "");
    assert_int_equal(h5store_read_attr_str(f->path, "/verdicts/reentrant", "verdict", buf, sizeof buf),
                     ST_OK);
    assert_string_equal(buf, "PASS");
}

static void test_attribute_rewrite_replaces_value(void **state)
{
    struct fixture *f = *state;
    struct h5store *s = begin(f);
    assert_int_equal(h5store_attr_str(s, "/case", "fusion", "none"), ST_OK);
    assert_int_equal(h5store_attr_str(s, "/case", "fusion", "bias_gelu"), ST_OK);
    assert_int_equal(h5store_commit(s), ST_OK);
    char buf[32];
    assert_int_equal(h5store_read_attr_str(f->path, "/case", "fusion", buf, sizeof buf), ST_OK);
    assert_string_equal(buf, "bias_gelu");
}

static void test_run_record_round_trips_with_attributes(void **state)
{
    struct fixture *f = *state;
    struct run_record r;
    run_record_init(&r, "reentrant");
    int64_t shape[2] = {4, 4};
    struct host_tensor loss = pattern_tensor(DT_F32, 0, NULL, 1);
    struct host_tensor gw = pattern_tensor(DT_F16, 2, shape, 2);
    struct host_tensor gb = pattern_tensor(DT_BF16, 1, shape, 3);
    struct host_tensor keep[3];
    keep[0] = pattern_tensor(DT_F32, 0, NULL, 1);
    keep[1] = pattern_tensor(DT_F16, 2, shape, 2);
    keep[2] = pattern_tensor(DT_BF16, 1, shape, 3);
    assert_int_equal(run_record_add(&r, "steps/1/loss", &loss), ST_OK);
    assert_int_equal(run_record_add(&r, "steps/1/grads/l0.weight", &gw), ST_OK);
    assert_int_equal(run_record_add(&r, "steps/1/grads/l0.bias", &gb), ST_OK);
    assert_int_equal(run_record_set_attr(&r, "memory.peak_bytes", 1048576), ST_OK);
    assert_int_equal(run_record_set_attr(&r, "timing.forward_ms", 1.25), ST_OK);
    assert_int_equal(run_record_set_attr(&r, "recomputes", 3), ST_OK);

    struct h5store *s = begin(f);
    assert_int_equal(h5store_write_run(s, &r), ST_OK);
    assert_int_equal(h5store_commit(s), ST_OK);
    run_record_free(&r);

    struct run_record back;
    assert_int_equal(h5store_read_run(f->path, "reentrant", &back), ST_OK);
    assert_string_equal(back.name, "reentrant");
    assert_int_equal(back.n, 3);
    assert_same_tensor(&run_record_find(&back, "steps/1/loss")->t, &keep[0]);
    assert_same_tensor(&run_record_find(&back, "steps/1/grads/l0.weight")->t, &keep[1]);
    assert_same_tensor(&run_record_find(&back, "steps/1/grads/l0.bias")->t, &keep[2]);
    assert_int_equal(back.n_attrs, 3);
    assert_true(run_record_attr(&back, "memory.peak_bytes") == 1048576.0);
    assert_true(run_record_attr(&back, "timing.forward_ms") == 1.25);
    assert_true(run_record_attr(&back, "recomputes") == 3.0);
    run_record_free(&back);
    for (int i = 0; i < 3; i++)
        host_tensor_free(&keep[i]);
}

static void test_whole_run_attributes_are_stored_as_int64(void **state)
{
    struct fixture *f = *state;
    struct run_record r;
    run_record_init(&r, "reentrant");
    assert_int_equal(run_record_set_attr(&r, "memory.peak_bytes", 1048576), ST_OK);
    assert_int_equal(run_record_set_attr(&r, "timing.forward_ms", 1.25), ST_OK);
    struct h5store *s = begin(f);
    assert_int_equal(h5store_write_run(s, &r), ST_OK);
    assert_int_equal(h5store_commit(s), ST_OK);
    run_record_free(&r);

    hid_t file = H5Fopen(f->path, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t a = H5Aopen_by_name(file, "/runs/reentrant/memory", "peak_bytes", H5P_DEFAULT, H5P_DEFAULT);
    hid_t t = H5Aget_type(a);
    assert_int_equal(H5Tget_class(t), H5T_INTEGER);
    H5Tclose(t);
    H5Aclose(a);
    a = H5Aopen_by_name(file, "/runs/reentrant/timing", "forward_ms", H5P_DEFAULT, H5P_DEFAULT);
    t = H5Aget_type(a);
    assert_int_equal(H5Tget_class(t), H5T_FLOAT);
    H5Tclose(t);
    H5Aclose(a);
    H5Fclose(file);
}

static void test_read_run_orders_naturally(void **state)
{
    struct fixture *f = *state;
    /* Added scrambled; read back in this order. */
    static const char *const expected[] = {
        "steps/1/loss",
        "steps/1/grads/l0.bias",
        "steps/1/grads/l0.weight",
        "steps/1/grads/l2.weight",
        "steps/1/grads/l10.weight",
        "steps/1/out",
        "steps/2/loss",
        "steps/2/grads/l0.weight",
        "steps/10/loss",
        "steps/10/grads/l0.weight",
        "final_params/l2.weight",
        "final_params/l10.weight",
        "saved/1/fingerprints",
    };
    static const int order[] = {9, 12, 4, 7, 0, 10, 2, 5, 11, 1, 8, 3, 6};
    const int n = (int)(sizeof expected / sizeof expected[0]);
    struct run_record r;
    run_record_init(&r, "nonreentrant");
    for (int i = 0; i < n; i++) {
        struct host_tensor t = pattern_tensor(DT_F32, 0, NULL, (unsigned)i);
        assert_int_equal(run_record_add(&r, expected[order[i]], &t), ST_OK);
    }
    struct h5store *s = begin(f);
    assert_int_equal(h5store_write_run(s, &r), ST_OK);
    assert_int_equal(h5store_commit(s), ST_OK);
    run_record_free(&r);

    struct run_record back;
    assert_int_equal(h5store_read_run(f->path, "nonreentrant", &back), ST_OK);
    assert_int_equal(back.n, n);
    for (int i = 0; i < n; i++)
        assert_string_equal(back.items[i].path, expected[i]);
    run_record_free(&back);
}

static void test_list_runs_returns_run_groups_in_name_order(void **state)
{
    struct fixture *f = *state;
    struct h5store *s = begin(f);
    const char *runs[] = {"reentrant", "baseline_1", "baseline_0"};
    for (int i = 0; i < 3; i++) {
        struct run_record r;
        run_record_init(&r, runs[i]);
        assert_int_equal(h5store_write_run(s, &r), ST_OK);
        run_record_free(&r);
    }
    struct host_tensor t = pattern_tensor(DT_F32, 0, NULL, 1);
    assert_int_equal(h5store_write_tensor(s, "/runs/not_a_run", &t), ST_OK);
    host_tensor_free(&t);
    assert_int_equal(h5store_commit(s), ST_OK);

    char(*names)[64] = NULL;
    int count = -1;
    assert_int_equal(h5store_list_runs(f->path, &names, &count), ST_OK);
    assert_int_equal(count, 3);
    assert_string_equal(names[0], "baseline_0");
    assert_string_equal(names[1], "baseline_1");
    assert_string_equal(names[2], "reentrant");
    free(names);
}

static herr_t collect_name(hid_t g, const char *name, const H5L_info_t *info, void *data)
{
    (void)g, (void)info;
    char *out = data;
    strcat(out, name);
    strcat(out, " ");
    return 0;
}

static void test_groups_keep_creation_order(void **state)
{
    struct fixture *f = *state;
    struct h5store *s = begin(f);
    struct host_tensor t = pattern_tensor(DT_F32, 0, NULL, 1);
    assert_int_equal(h5store_write_tensor(s, "/zeta/b", &t), ST_OK);
    assert_int_equal(h5store_write_tensor(s, "/zeta/a", &t), ST_OK);
    assert_int_equal(h5store_write_tensor(s, "/alpha", &t), ST_OK);
    assert_int_equal(h5store_attr_str(s, "/mid", "k", "v"), ST_OK);
    host_tensor_free(&t);
    assert_int_equal(h5store_commit(s), ST_OK);

    char root[128] = "", zeta[128] = "";
    hid_t file = H5Fopen(f->path, H5F_ACC_RDONLY, H5P_DEFAULT);
    assert_true(file >= 0);
    hid_t g = H5Gopen2(file, "/zeta", H5P_DEFAULT);
    assert_true(H5Literate(file, H5_INDEX_CRT_ORDER, H5_ITER_INC, NULL, collect_name, root) >= 0);
    assert_true(H5Literate(g, H5_INDEX_CRT_ORDER, H5_ITER_INC, NULL, collect_name, zeta) >= 0);
    H5Gclose(g);
    H5Fclose(file);
    assert_string_equal(root, "zeta alpha mid ");
    assert_string_equal(zeta, "b a ");
}

/* ---- atomic publish ------------------------------------------------- */


static void test_abort_leaves_no_file(void **state)
{
    struct fixture *f = *state;
    struct h5store *s = begin(f);
    struct host_tensor t = pattern_tensor(DT_F32, 0, NULL, 1);
    assert_int_equal(h5store_write_tensor(s, "/x", &t), ST_OK);
    host_tensor_free(&t);
    h5store_abort(s);
    assert_false(temp_exists(f));
    assert_false(exists(f->path));
}

static void test_aborted_write_keeps_previous_file(void **state)
{
    struct fixture *f = *state;
    write_sample(f->path);
    size_t n_before, n_after;
    unsigned char *before = read_bytes(f->path, &n_before);

    struct h5store *s = begin(f);
    struct host_tensor t = pattern_tensor(DT_F32, 0, NULL, 99);
    assert_int_equal(h5store_write_tensor(s, "/inputs/x", &t), ST_OK);
    host_tensor_free(&t);
    h5store_abort(s);

    unsigned char *after = read_bytes(f->path, &n_after);
    assert_int_equal(n_before, n_after);
    assert_memory_equal(before, after, n_before);
    assert_false(temp_exists(f));
    free(before);
    free(after);
}

static void test_commit_after_failed_write_is_refused(void **state)
{
    struct fixture *f = *state;
    struct h5store *s = begin(f);
    struct host_tensor t = pattern_tensor(DT_F32, 0, NULL, 1);
    assert_int_equal(h5store_write_tensor(s, "/x", &t), ST_OK);
    /* Writing the same dataset twice is a runner bug. */
    assert_int_equal(h5store_write_tensor(s, "/x", &t), ST_INTERNAL);
    assert_message_has("/x: already written");
    host_tensor_free(&t);
    assert_int_equal(h5store_commit(s), ST_INTERNAL);
    assert_message_has(f->path);
    assert_false(exists(f->path));
    assert_false(temp_exists(f));
}

/* ---- bad input files ------------------------------------------------ */

static void test_missing_file_is_input_error(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(h5store_check_file(f->path), ST_INPUT);
    assert_message_has(f->path);
    assert_message_has("No such file");
    struct run_record r;
    assert_int_equal(h5store_read_run(f->path, "baseline_0", &r), ST_INPUT);
    assert_message_has(f->path);
}

static void test_non_hdf5_file_is_input_error(void **state)
{
    struct fixture *f = *state;
    char garbage[4096];
    for (size_t i = 0; i < sizeof garbage; i++)
        garbage[i] = (char)(i * 7 + 3);
    write_bytes(f->path, garbage, sizeof garbage);
    assert_int_equal(h5store_check_file(f->path), ST_INPUT);
    assert_message_has(f->path);
    assert_message_has("not an HDF5 file");
}

static void test_truncated_file_is_input_error(void **state)
{
    struct fixture *f = *state;
    char full[700];
    snprintf(full, sizeof full, "%s/full.h5", f->dir);
    write_sample(full);
    size_t n;
    unsigned char *bytes = read_bytes(full, &n);
    write_bytes(f->path, bytes, n / 2);
    free(bytes);
    assert_int_equal(h5store_check_file(full), ST_OK);
    assert_int_equal(h5store_check_file(f->path), ST_INPUT);
    assert_message_has(f->path);
    struct run_record r;
    assert_int_equal(h5store_read_run(f->path, "baseline_0", &r), ST_INPUT);
    assert_message_has(f->path);
}

static void test_wrong_schema_version_is_input_error(void **state)
{
    struct fixture *f = *state;
    struct h5store *s = NULL;
    assert_int_equal(h5store_create(&s, f->path), ST_OK);
    assert_int_equal(h5store_attr_int(s, "/", "schema_version", H5STORE_SCHEMA_VERSION + 1), ST_OK);
    assert_int_equal(h5store_commit(s), ST_OK);
    assert_int_equal(h5store_check_file(f->path), ST_INPUT);
    assert_message_has(f->path);
    assert_message_has("schema_version is 2");
}

static void test_missing_schema_version_is_input_error(void **state)
{
    struct fixture *f = *state;
    struct h5store *s = NULL;
    assert_int_equal(h5store_create(&s, f->path), ST_OK);
    assert_int_equal(h5store_attr_str(s, "/", "case", "x"), ST_OK);
    assert_int_equal(h5store_commit(s), ST_OK);
    assert_int_equal(h5store_check_file(f->path), ST_INPUT);
    assert_message_has(f->path);
    assert_message_has("schema_version missing");
}

static void test_missing_run_is_input_error(void **state)
{
    struct fixture *f = *state;
    write_sample(f->path);
    struct run_record r;
    assert_int_equal(h5store_read_run(f->path, "reentrant", &r), ST_INPUT);
    assert_message_has(f->path);
    assert_message_has("/runs/reentrant: run missing");
    assert_int_equal(r.n, 0);
    assert_null(r.items);
}

static void test_missing_dataset_is_input_error(void **state)
{
    struct fixture *f = *state;
    write_sample(f->path);
    struct host_tensor t;
    assert_int_equal(h5store_read_tensor(f->path, "/runs/reentrant/steps/1/grads/l0.bias", &t),
                     ST_INPUT);
    assert_message_has(f->path);
    assert_message_has("/runs/reentrant/steps/1/grads/l0.bias: dataset missing");
    assert_null(t.data);
}

static void test_missing_attribute_is_input_error(void **state)
{
    struct fixture *f = *state;
    write_sample(f->path);
    char buf[32];
    assert_int_equal(h5store_read_attr_str(f->path, "/", "git_rev", buf, sizeof buf), ST_INPUT);
    assert_message_has(f->path);
    assert_message_has("git_rev missing");
}

static void test_create_in_missing_directory_is_input_error(void **state)
{
    struct fixture *f = *state;
    char p[700];
    snprintf(p, sizeof p, "%s/no/such/dir/report.h5", f->dir);
    struct h5store *s = (struct h5store *)1;
    assert_int_equal(h5store_create(&s, p), ST_INPUT);
    assert_null(s);
    assert_message_has(p);
}

static void test_create_in_unwritable_directory_is_input_error(void **state)
{
    struct fixture *f = *state;
    char d[700], p[720];
    snprintf(d, sizeof d, "%s/readonly", f->dir);
    snprintf(p, sizeof p, "%s/report.h5", d);
    assert_int_equal(mkdir(d, 0555), 0);
    if (access(d, W_OK) == 0)
        skip(); /* root writes anywhere; the missing-directory test still runs */
    struct h5store *s = NULL;
    assert_int_equal(h5store_create(&s, p), ST_INPUT);
    assert_null(s);
    assert_message_has(p);
    assert_message_has("Permission denied");
}

/* A file written the way h5py writes one, with no dtype attributes: h5py's
 * float16 type, int32 (widened to int64), h5py's bool enum, a
 * variable-length string attribute, groups without creation order. */
static void test_foreign_file_without_dtype_attributes_reads(void **state)
{
    struct fixture *f = *state;
    hid_t file = H5Fcreate(f->path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    hid_t scalar = H5Screate(H5S_SCALAR);
    long long version = 1;
    hid_t a = H5Acreate2(file, "schema_version", H5T_STD_I64LE, scalar, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, H5T_NATIVE_LLONG, &version);
    H5Aclose(a);
    hid_t vstr = H5Tcopy(H5T_C_S1);
    H5Tset_size(vstr, H5T_VARIABLE);
    H5Tset_cset(vstr, H5T_CSET_UTF8);
    const char *device = "cpu";
    a = H5Acreate2(file, "device", vstr, scalar, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, vstr, &device);
    H5Aclose(a);

    hsize_t n = 4;
    hid_t space = H5Screate_simple(1, &n, NULL);
    /* h5py's IEEE_F16LE */
    hid_t f16 = H5Tcopy(H5T_IEEE_F32LE);
    H5Tset_fields(f16, 15, 10, 5, 0, 10);
    H5Tset_size(f16, 2);
    H5Tset_ebias(f16, 15);
    const uint16_t half[4] = {0x3c00, 0xc000, 0x7c00, 0x0001};
    hid_t ds = H5Dcreate2(file, "/runs/torch/steps/1/grads/l0.bias", f16, space, lcpl, H5P_DEFAULT,
                          H5P_DEFAULT);
    H5Dwrite(ds, f16, H5S_ALL, H5S_ALL, H5P_DEFAULT, half);
    H5Dclose(ds);
    const int32_t ints[4] = {-1, 0, 7, 2000000000};
    ds = H5Dcreate2(file, "/runs/torch/steps/1/labels", H5T_STD_I32LE, space, lcpl, H5P_DEFAULT,
                    H5P_DEFAULT);
    H5Dwrite(ds, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, ints);
    H5Dclose(ds);
    /* h5py's bool: an int8 enum FALSE = 0, TRUE = 1 */
    hid_t boolean = H5Tenum_create(H5T_NATIVE_INT8);
    int8_t v0 = 0, v1 = 1;
    H5Tenum_insert(boolean, "FALSE", &v0);
    H5Tenum_insert(boolean, "TRUE", &v1);
    const int8_t mask[4] = {1, 0, 0, 1};
    ds = H5Dcreate2(file, "/runs/torch/steps/1/mask", boolean, space, lcpl, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(ds, boolean, H5S_ALL, H5S_ALL, H5P_DEFAULT, mask);
    H5Dclose(ds);
    float loss = 0.5f;
    ds = H5Dcreate2(file, "/runs/torch/steps/1/loss", H5T_IEEE_F32LE, scalar, lcpl, H5P_DEFAULT,
                    H5P_DEFAULT);
    H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, &loss);
    H5Dclose(ds);
    hid_t g = H5Gcreate2(file, "/runs/torch/memory", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    int32_t peak = 123456;
    a = H5Acreate2(g, "peak_bytes", H5T_STD_I32LE, scalar, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, H5T_NATIVE_INT32, &peak);
    H5Aclose(a);
    H5Gclose(g);
    H5Tclose(boolean);
    H5Tclose(f16);
    H5Tclose(vstr);
    H5Sclose(space);
    H5Sclose(scalar);
    H5Pclose(lcpl);
    assert_true(H5Fclose(file) >= 0);

    char dev[16];
    assert_int_equal(h5store_read_attr_str(f->path, "/", "device", dev, sizeof dev), ST_OK);
    assert_string_equal(dev, "cpu");
    struct run_record r;
    assert_int_equal(h5store_read_run(f->path, "torch", &r), ST_OK);
    assert_int_equal(r.n, 4);
    assert_string_equal(r.items[0].path, "steps/1/loss");
    assert_string_equal(r.items[1].path, "steps/1/grads/l0.bias");
    const struct host_tensor *t = &r.items[1].t;
    assert_int_equal(t->dtype, DT_F16);
    assert_memory_equal(t->data, half, sizeof half);
    t = &run_record_find(&r, "steps/1/labels")->t;
    assert_int_equal(t->dtype, DT_I64);
    assert_int_equal(((int64_t *)t->data)[0], -1);
    assert_int_equal(((int64_t *)t->data)[3], 2000000000);
    t = &run_record_find(&r, "steps/1/mask")->t;
    assert_int_equal(t->dtype, DT_BOOL);
    assert_memory_equal(t->data, mask, sizeof mask);
    t = &run_record_find(&r, "steps/1/loss")->t;
    assert_int_equal(t->ndim, 0);
    assert_true(*(float *)t->data == 0.5f);
    assert_true(run_record_attr(&r, "memory.peak_bytes") == 123456.0);
    run_record_free(&r);
}

static void test_dtype_attribute_mismatch_is_input_error(void **state)
{
    struct fixture *f = *state;
    struct h5store *s = begin(f);
    int64_t shape[1] = {3};
    struct host_tensor t = pattern_tensor(DT_F64, 1, shape, 1);
    assert_int_equal(h5store_write_tensor(s, "/x", &t), ST_OK);
    host_tensor_free(&t);
    assert_int_equal(h5store_commit(s), ST_OK);
    /* Relabel the float64 dataset as float32 behind h5store's back. */
    hid_t file = H5Fopen(f->path, H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t ds = H5Dopen2(file, "/x", H5P_DEFAULT);
    H5Adelete(ds, "dtype");
    hid_t str = H5Tcopy(H5T_C_S1);
    H5Tset_size(str, 8);
    hid_t scalar = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(ds, "dtype", str, scalar, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, str, "float32");
    H5Aclose(a);
    H5Sclose(scalar);
    H5Tclose(str);
    H5Dclose(ds);
    H5Fclose(file);

    struct host_tensor back;
    assert_int_equal(h5store_read_tensor(f->path, "/x", &back), ST_INPUT);
    assert_message_has(f->path);
    assert_message_has("/x: dtype attribute says float32");
}

/* What every run of the schema holds, checked before diff compares. */
static void test_check_run_needs_numbered_steps_each_with_one_loss(void **state)
{
    (void)state;
    int64_t two[1] = {2};
    struct run_record r;
    struct host_tensor t;

    run_record_init(&r, "baseline_0");
    assert_int_equal(h5store_check_run("f.h5", &r), ST_INPUT);
    assert_message_has("f.h5: /runs/baseline_0/steps: no step recorded");
    t = pattern_tensor(DT_F32, 1, two, 1);
    assert_int_equal(run_record_add(&r, "final_params/w", &t), ST_OK);
    assert_int_equal(h5store_check_run("f.h5", &r), ST_INPUT);
    assert_message_has("no step recorded");

    t = pattern_tensor(DT_F32, 0, NULL, 2);
    assert_int_equal(run_record_add(&r, "steps/1/loss", &t), ST_OK);
    t = pattern_tensor(DT_F32, 1, two, 3);
    assert_int_equal(run_record_add(&r, "steps/1/grads/w", &t), ST_OK);
    assert_int_equal(h5store_check_run("f.h5", &r), ST_OK);

    t = pattern_tensor(DT_F32, 1, two, 4);
    assert_int_equal(run_record_add(&r, "steps/10/grads/w", &t), ST_OK);
    assert_int_equal(h5store_check_run("f.h5", &r), ST_INPUT);
    assert_message_has("f.h5: /runs/baseline_0/steps/10/loss: dataset missing");
    t = pattern_tensor(DT_F32, 1, two, 5);
    assert_int_equal(run_record_add(&r, "steps/10/loss", &t), ST_OK);
    assert_int_equal(h5store_check_run("f.h5", &r), ST_INPUT);
    assert_message_has("steps/10/loss: holds 2 values, expected one");
    run_record_free(&r);

    run_record_init(&r, "x");
    t = pattern_tensor(DT_F32, 0, NULL, 6);
    assert_int_equal(run_record_add(&r, "steps/last/loss", &t), ST_OK);
    assert_int_equal(h5store_check_run("f.h5", &r), ST_INPUT);
    assert_message_has("/runs/x/steps/last/loss: not under a numbered step");
    run_record_free(&r);
}

/* A shape that promises more data than the file holds is refused before
 * anything is allocated for it: contiguous data never written, and a
 * chunked dataset larger than the whole file could hold compressed. */
static void test_shape_larger_than_the_data_is_input_error(void **state)
{
    struct fixture *f = *state;
    hid_t file = H5Fcreate(f->path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(file >= 0);
    long long one = 1;
    hid_t scalar = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(file, "schema_version", H5T_STD_I64LE, scalar, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(H5Awrite(a, H5T_NATIVE_LLONG, &one) >= 0);
    H5Aclose(a);
    hsize_t small[1] = {1000}, huge[1] = {(hsize_t)1 << 40}, chunk[1] = {1024};
    hid_t space = H5Screate_simple(1, small, NULL);
    hid_t ds = H5Dcreate2(file, "unwritten", H5T_IEEE_F32LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(ds >= 0);
    H5Dclose(ds);
    H5Sclose(space);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    assert_true(H5Pset_chunk(dcpl, 1, chunk) >= 0);
    space = H5Screate_simple(1, huge, NULL);
    ds = H5Dcreate2(file, "huge", H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    assert_true(ds >= 0);
    H5Dclose(ds);
    H5Sclose(space);
    H5Pclose(dcpl);
    H5Sclose(scalar);
    assert_true(H5Fclose(file) >= 0);

    struct host_tensor t;
    assert_int_equal(h5store_read_tensor(f->path, "/unwritten", &t), ST_INPUT);
    assert_message_has("/unwritten: the file holds 0 of its 4000 bytes");
    assert_null(t.data);
    assert_int_equal(h5store_read_tensor(f->path, "/huge", &t), ST_INPUT);
    assert_message_has("/huge: shape needs 4398046511104 bytes, more than a");
    assert_null(t.data);

    /* Shapes whose byte count wraps are refused, not under-allocated. */
    int64_t wraps[2] = {(int64_t)1 << 40, (int64_t)1 << 40};
    assert_int_equal(host_tensor_alloc(&t, DT_F32, 2, wraps), ST_RUN);
    assert_null(t.data);
    assert_int_equal(t.numel, 0);
}

static void test_hdf5_errors_never_reach_stderr(void **state)
{
    struct fixture *f = *state;
    char err_path[700], full[700], p[700];
    snprintf(err_path, sizeof err_path, "%s/stderr.txt", f->dir);
    snprintf(full, sizeof full, "%s/full.h5", f->dir);
    snprintf(p, sizeof p, "%s/missing/report.h5", f->dir);
    write_sample(full);
    size_t n;
    unsigned char *bytes = read_bytes(full, &n);
    write_bytes(f->path, bytes, n / 2);
    free(bytes);

    fflush(stderr);
    int saved = dup(2);
    int fd = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(saved >= 0 && fd >= 0);
    dup2(fd, 2);
    close(fd);

    struct host_tensor t;
    struct run_record r;
    struct h5store *s = NULL;
    int rc[6];
    rc[0] = h5store_check_file(f->path);                         /* truncated */
    rc[1] = h5store_read_tensor(full, "/inputs/nope", &t);        /* missing dataset */
    rc[2] = h5store_read_tensor(full, "/runs/baseline_0", &t);    /* a group, not a dataset */
    rc[3] = h5store_read_run(full, "nope", &r);                   /* missing run */
    rc[4] = h5store_create(&s, p);                                /* missing directory */
    assert_int_equal(h5store_create(&s, f->tmp), ST_OK);
    struct host_tensor x = pattern_tensor(DT_F32, 0, NULL, 1);
    h5store_write_tensor(s, "/a", &x);
    rc[5] = h5store_write_tensor(s, "/a/b", &x);                  /* /a is a dataset */
    host_tensor_free(&x);
    h5store_abort(s);

    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    for (int i = 0; i < 4; i++)
        assert_int_equal(rc[i], ST_INPUT);
    assert_int_equal(rc[4], ST_INPUT);
    assert_int_equal(rc[5], ST_INTERNAL);
    struct stat st;
    assert_int_equal(stat(err_path, &st), 0);
    assert_int_equal(st.st_size, 0);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_commit_publishes_final_file_and_removes_tmp),
        T(test_float32_tensor_round_trips_bitwise),
        T(test_float16_tensor_round_trips_bitwise),
        T(test_bfloat16_tensor_round_trips_bitwise),
        T(test_scalar_round_trips_as_rank0),
        T(test_float64_int64_uint8_bool_round_trip),
        T(test_empty_tensor_round_trips),
        T(test_root_string_attributes_read_back),
        T(test_attribute_rewrite_replaces_value),
        T(test_run_record_round_trips_with_attributes),
        T(test_whole_run_attributes_are_stored_as_int64),
        T(test_read_run_orders_naturally),
        T(test_list_runs_returns_run_groups_in_name_order),
        T(test_groups_keep_creation_order),
        T(test_abort_leaves_no_file),
        T(test_aborted_write_keeps_previous_file),
        T(test_commit_after_failed_write_is_refused),
        T(test_missing_file_is_input_error),
        T(test_non_hdf5_file_is_input_error),
        T(test_truncated_file_is_input_error),
        T(test_wrong_schema_version_is_input_error),
        T(test_missing_schema_version_is_input_error),
        T(test_missing_run_is_input_error),
        T(test_missing_dataset_is_input_error),
        T(test_missing_attribute_is_input_error),
        T(test_create_in_missing_directory_is_input_error),
        T(test_create_in_unwritable_directory_is_input_error),
        T(test_foreign_file_without_dtype_attributes_reads),
        T(test_dtype_attribute_mismatch_is_input_error),
        T(test_check_run_needs_numbered_steps_each_with_one_loss),
        T(test_shape_larger_than_the_data_is_input_error),
        T(test_hdf5_errors_never_reach_stderr),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
