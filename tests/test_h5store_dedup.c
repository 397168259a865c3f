/* h5store, identical tensors stored once: a run's tensor equal to its
 * reference run's is a hard link to it (one object, read back equal), a
 * tensor that differs in one byte, dtype, shape or only past a CRC-32
 * collision is a copy, every run dataset carries its zlib crc32, and
 * judging reads runs as stored tensors, through one open report when held,
 * and a report opened once (h5report_open) is read whole, and judged,
 * through that handle alone. Each test in its own directory. */
#define _XOPEN_SOURCE 700

#include <ftw.h>
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
#include <zlib.h>

#include "error.h"
#include "h5store.h"
#include "host_tensor.h"
#include "judge.h"
#include "run_record.h"
#include "run_tensors.h"

struct fixture {
    char dir[512];
    char path[600];
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    const char *base = getenv("TMPDIR");
    if (!f)
        return -1;
    snprintf(f->dir, sizeof f->dir, "%s/test_h5store_dedup.XXXXXX", base && base[0] ? base : "/tmp");
    if (!mkdtemp(f->dir)) {
        free(f);
        return -1;
    }
    snprintf(f->path, sizeof f->path, "%s/report.h5", f->dir);
    error_clear();
    *state = f;
    return 0;
}

static int remove_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    nftw(f->dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(f);
    return 0;
}

static struct host_tensor f32_bits(const uint32_t *bits, int n)
{
    struct host_tensor t;
    int64_t shape[1] = {n};
    assert_int_equal(host_tensor_alloc(&t, DT_F32, 1, shape), ST_OK);
    memcpy(t.data, bits, (size_t)n * 4);
    return t;
}

/* Writes `ref` as baseline_0's and `t` as run's, both at path p, and says
 * whether the run's was linked. */
static int write_pair(const char *file, const struct host_tensor *ref, const struct host_tensor *t, const char *p)
{
    struct h5store *s;
    int linked = -1;
    assert_int_equal(h5store_create(&s, file), ST_OK);
    assert_int_equal(h5store_attr_int(s, "/", "schema_version", H5STORE_SCHEMA_VERSION), ST_OK);
    assert_int_equal(h5store_write_run_tensor(s, "baseline_0", "baseline_0", p, ref, NULL), ST_OK);
    assert_int_equal(h5store_write_run_tensor(s, "run", "baseline_0", p, t, &linked), ST_OK);
    assert_int_equal(h5store_commit(s), ST_OK);
    return linked;
}

/* The two paths' objects, as h5py's `.id` would compare them. */
static int same_object(const char *file, const char *a, const char *b)
{
    hid_t f = H5Fopen(file, H5F_ACC_RDONLY, H5P_DEFAULT);
    H5O_info_t ia, ib;
    assert_true(f >= 0);
    assert_true(H5Oget_info_by_name(f, a, &ia, H5P_DEFAULT) >= 0);
    assert_true(H5Oget_info_by_name(f, b, &ib, H5P_DEFAULT) >= 0);
    H5Fclose(f);
    return ia.addr == ib.addr;
}

static long long crc_attr(const char *file, const char *dataset)
{
    long long crc = -1;
    hid_t f = H5Fopen(file, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t a = H5Aopen_by_name(f, dataset, "crc32", H5P_DEFAULT, H5P_DEFAULT);
    assert_true(a >= 0);
    assert_true(H5Aread(a, H5T_NATIVE_LLONG, &crc) >= 0);
    H5Aclose(a);
    H5Fclose(f);
    return crc;
}

static void test_identical_tensor_is_a_hard_link_to_the_reference(void **state)
{
    struct fixture *f = *state;
    uint32_t bits[3] = {0x3f800000u, 0x7fc00001u, 0x80000000u}; /* 1, a NaN payload, -0 */
    struct host_tensor a = f32_bits(bits, 3), b = f32_bits(bits, 3);
    assert_int_equal(write_pair(f->path, &a, &b, "steps/1/grads/w"), 1);
    assert_true(same_object(f->path, "/runs/baseline_0/steps/1/grads/w", "/runs/run/steps/1/grads/w"));
    struct host_tensor back;
    assert_int_equal(h5store_read_tensor(f->path, "/runs/run/steps/1/grads/w", &back), ST_OK);
    assert_memory_equal(back.data, bits, sizeof bits);
    host_tensor_free(&back);
    host_tensor_free(&a);
    host_tensor_free(&b);
}

static void test_a_tensor_differing_in_one_bit_is_a_copy(void **state)
{
    struct fixture *f = *state;
    uint32_t bits[2] = {0x3f800000u, 0x40000000u}, other[2] = {0x3f800000u, 0x40000001u};
    struct host_tensor a = f32_bits(bits, 2), b = f32_bits(other, 2);
    assert_int_equal(write_pair(f->path, &a, &b, "final_params/w"), 0);
    assert_false(same_object(f->path, "/runs/baseline_0/final_params/w", "/runs/run/final_params/w"));
    host_tensor_free(&a);
    host_tensor_free(&b);
}

/* Two float32 pairs whose bytes differ and whose CRC-32s agree (found by a
 * birthday search): the checksum alone must never make a link. */
static void test_a_crc32_collision_is_still_a_copy(void **state)
{
    struct fixture *f = *state;
    uint32_t bits[2] = {0x3ecbd14bu, 0x3f368c7au}, other[2] = {0xbf6647d3u, 0x3f4af061u};
    assert_int_equal(crc32(0, (const Bytef *)bits, 8), crc32(0, (const Bytef *)other, 8));
    struct host_tensor a = f32_bits(bits, 2), b = f32_bits(other, 2);
    assert_int_equal(write_pair(f->path, &a, &b, "steps/1/loss_pair"), 0);
    assert_false(same_object(f->path, "/runs/baseline_0/steps/1/loss_pair", "/runs/run/steps/1/loss_pair"));
    struct host_tensor back;
    assert_int_equal(h5store_read_tensor(f->path, "/runs/run/steps/1/loss_pair", &back), ST_OK);
    assert_memory_equal(back.data, other, sizeof other);
    host_tensor_free(&back);
    host_tensor_free(&a);
    host_tensor_free(&b);
}

static void test_same_bytes_in_another_shape_is_a_copy(void **state)
{
    struct fixture *f = *state;
    uint32_t bits[4] = {1, 2, 3, 4};
    struct host_tensor a = f32_bits(bits, 4), b;
    int64_t shape[2] = {2, 2};
    assert_int_equal(host_tensor_alloc(&b, DT_F32, 2, shape), ST_OK);
    memcpy(b.data, bits, sizeof bits);
    assert_int_equal(write_pair(f->path, &a, &b, "steps/1/grads/w"), 0);
    host_tensor_free(&a);
    host_tensor_free(&b);
}

static void test_every_run_dataset_carries_its_zlib_crc32(void **state)
{
    struct fixture *f = *state;
    uint32_t bits[2] = {0x3f800000u, 0x40000000u}, other[2] = {0x3f800000u, 0x40400000u};
    struct host_tensor a = f32_bits(bits, 2), b = f32_bits(other, 2);
    write_pair(f->path, &a, &b, "steps/1/grads/w");
    assert_int_equal(crc_attr(f->path, "/runs/baseline_0/steps/1/grads/w"), (long long)crc32(0, (const Bytef *)bits, 8));
    assert_int_equal(crc_attr(f->path, "/runs/run/steps/1/grads/w"), (long long)crc32(0, (const Bytef *)other, 8));
    host_tensor_free(&a);
    host_tensor_free(&b);
}

/* A stored run holds shapes only; its linked tensor is known equal to the
 * reference's without reading, a copied one is read when acquired. */
static void test_stored_runs_know_linked_tensors_equal_unread(void **state)
{
    struct fixture *f = *state;
    uint32_t bits[2] = {0x3f800000u, 0x40000000u}, other[2] = {0x3f800000u, 0x40400000u};
    struct host_tensor a = f32_bits(bits, 2), b = f32_bits(bits, 2), c = f32_bits(other, 2);
    struct h5store *s;
    assert_int_equal(h5store_create(&s, f->path), ST_OK);
    assert_int_equal(h5store_attr_int(s, "/", "schema_version", H5STORE_SCHEMA_VERSION), ST_OK);
    assert_int_equal(h5store_write_run_tensor(s, "baseline_0", "baseline_0", "steps/1/loss", &a, NULL), ST_OK);
    assert_int_equal(h5store_write_run_tensor(s, "baseline_0", "baseline_0", "final_params/w", &a, NULL), ST_OK);
    assert_int_equal(h5store_write_run_tensor(s, "run", "baseline_0", "steps/1/loss", &b, NULL), ST_OK);
    assert_int_equal(h5store_write_run_tensor(s, "run", "baseline_0", "final_params/w", &c, NULL), ST_OK);
    assert_int_equal(h5store_commit(s), ST_OK);
    struct run_record base, run;
    assert_int_equal(h5store_read_run_stored(f->path, "baseline_0", &base), ST_OK);
    assert_int_equal(h5store_read_run_stored(f->path, "run", &run), ST_OK);
    const struct run_tensor *bl = run_record_find(&base, "steps/1/loss"), *rl = run_record_find(&run, "steps/1/loss");
    const struct run_tensor *bw = run_record_find(&base, "final_params/w"), *rw = run_record_find(&run, "final_params/w");
    assert_non_null(rl);
    assert_null(rl->t.data);
    assert_true(rl->stored);
    assert_true(run_tensors_same_object(&base, bl, &run, rl));
    assert_false(run_tensors_same_object(&base, bw, &run, rw));
    struct tensor_hold h;
    assert_int_equal(run_tensor_acquire(&run, rw, &h), ST_OK);
    assert_memory_equal(h.t.data, other, sizeof other);
    run_tensor_release(&h);
    run_record_free(&base);
    run_record_free(&run);
    host_tensor_free(&a);
    host_tensor_free(&b);
    host_tensor_free(&c);
}

/* A stored tensor larger than its record's limit is refused before it is
 * read, naming the report and the dataset. */
static void test_stored_tensor_past_the_limit_is_refused_naming_it(void **state)
{
    struct fixture *f = *state;
    uint32_t bits[4] = {1, 2, 3, 4};
    struct host_tensor a = f32_bits(bits, 4);
    struct h5store *s;
    assert_int_equal(h5store_create(&s, f->path), ST_OK);
    assert_int_equal(h5store_attr_int(s, "/", "schema_version", H5STORE_SCHEMA_VERSION), ST_OK);
    assert_int_equal(h5store_write_run_tensor(s, "baseline_0", "baseline_0", "steps/1/grads/w", &a, NULL), ST_OK);
    assert_int_equal(h5store_commit(s), ST_OK);
    struct run_record r;
    assert_int_equal(h5store_read_run_stored(f->path, "baseline_0", &r), ST_OK);
    r.tensor_limit = 8;
    struct tensor_hold h;
    assert_int_equal(run_tensor_acquire(&r, run_record_find(&r, "steps/1/grads/w"), &h), ST_INPUT);
    assert_non_null(strstr(error_message(), "report.h5: /runs/baseline_0/steps/1/grads/w: loading its 16 bytes"));
    run_record_free(&r);
    host_tensor_free(&a);
}

/* A held source is the report opened once: its loads use that handle, so
 * they still succeed after the file's name is gone (without the hold,
 * each load opens the path and fails). Let go, the next load opens the
 * path again and names what is missing. */
static void test_a_held_source_loads_through_one_open_report(void **state)
{
    struct fixture *f = *state;
    uint32_t bits[4] = {1, 2, 3, 4};
    struct host_tensor a = f32_bits(bits, 4);
    struct h5store *s;
    assert_int_equal(h5store_create(&s, f->path), ST_OK);
    assert_int_equal(h5store_attr_int(s, "/", "schema_version", H5STORE_SCHEMA_VERSION), ST_OK);
    assert_int_equal(h5store_write_run_tensor(s, "baseline_0", "baseline_0", "steps/1/grads/w", &a, NULL), ST_OK);
    assert_int_equal(h5store_commit(s), ST_OK);
    struct run_record r;
    assert_int_equal(h5store_read_run_stored(f->path, "baseline_0", &r), ST_OK);
    assert_int_equal(h5store_hold_source(&r), ST_OK);
    assert_int_equal(unlink(f->path), 0);
    struct tensor_hold h;
    assert_int_equal(run_tensor_acquire(&r, run_record_find(&r, "steps/1/grads/w"), &h), ST_OK);
    assert_memory_equal(h.t.data, bits, sizeof bits);
    run_tensor_release(&h);
    h5store_let_go_source(&r);
    assert_int_equal(run_tensor_acquire(&r, run_record_find(&r, "steps/1/grads/w"), &h), ST_INPUT);
    assert_non_null(strstr(error_message(), "report.h5"));
    run_record_free(&r);
    host_tensor_free(&a);
}

/* A small complete report: baseline_0, baseline_1 and reentrant, each one
 * step (loss, one grad) and a final parameter, the same bytes throughout. */
static void write_small_report(const char *file)
{
    static const char *const runs[] = {"baseline_0", "baseline_1", "reentrant"};
    static const char *const paths[] = {"steps/1/loss", "steps/1/grads/w", "final_params/w"};
    uint32_t loss[1] = {0x3f800000u}, w[4] = {0x3f800000u, 0x40000000u, 0x40400000u, 0x40800000u};
    struct host_tensor l = f32_bits(loss, 1), t = f32_bits(w, 4);
    struct h5store *s;
    assert_int_equal(h5store_create(&s, file), ST_OK);
    assert_int_equal(h5store_attr_int(s, "/", "schema_version", H5STORE_SCHEMA_VERSION), ST_OK);
    assert_int_equal(h5store_attr_str(s, "/", "case", "one_handle"), ST_OK);
    for (int r = 0; r < 3; r++)
        for (int p = 0; p < 3; p++)
            assert_int_equal(h5store_write_run_tensor(s, runs[r], "baseline_0", paths[p], p ? &t : &l, NULL), ST_OK);
    assert_int_equal(h5store_commit(s), ST_OK);
    host_tensor_free(&l);
    host_tensor_free(&t);
}

/* A report opened once is read whole through its handle: with its name
 * gone, the attributes, the run list, the claimed bytes, a loaded run and
 * a stored run (holding the same handle after it is closed) all still
 * read, where every reader by path fails. */
static void test_a_report_opened_once_reads_whole_after_its_name_is_gone(void **state)
{
    struct fixture *f = *state;
    write_small_report(f->path);
    struct h5report *rep;
    assert_int_equal(h5report_open(&rep, f->path), ST_OK);
    assert_string_equal(h5report_path(rep), f->path);
    assert_int_equal(unlink(f->path), 0);
    char buf[64], (*names)[64] = NULL;
    int count = 0;
    assert_int_equal(h5report_read_attr_str(rep, "/", "case", buf, sizeof buf), ST_OK);
    assert_string_equal(buf, "one_handle");
    assert_true(h5report_has_group(rep, "/runs/reentrant"));
    assert_false(h5report_has_group(rep, "/case"));
    assert_int_equal(h5report_list_runs(rep, &names, &count), ST_OK);
    assert_int_equal(count, 3);
    assert_string_equal(names[2], "reentrant");
    free(names);
    uint64_t bytes = 0, largest = 0, budget = 1 << 20;
    assert_int_equal(h5report_claimed_bytes(rep, "reentrant", &bytes, &largest), ST_OK);
    assert_int_equal(bytes, 4 + 16 + 16);
    assert_int_equal(largest, 16);
    struct run_record loaded, stored;
    assert_int_equal(h5report_read_run_within(rep, "baseline_1", &budget, &loaded), ST_OK);
    assert_int_equal(loaded.n, 3);
    assert_int_equal(budget, (1 << 20) - 36);
    run_record_free(&loaded);
    assert_int_equal(h5report_read_run_stored(rep, "reentrant", &stored), ST_OK);
    assert_true(stored.source_file > 0);
    h5report_close(rep); /* the run still holds the one open file */
    struct tensor_hold h;
    assert_int_equal(run_tensor_acquire(&stored, run_record_find(&stored, "steps/1/grads/w"), &h), ST_OK);
    assert_int_equal(h.t.numel, 4);
    run_tensor_release(&h);
    h5store_let_go_source(&stored);
    run_record_free(&stored);
    /* By path, the report is gone. */
    assert_int_equal(h5store_list_runs(f->path, &names, &count), ST_INPUT);
    assert_null(names);
    assert_int_equal(h5store_read_attr_str(f->path, "/", "case", buf, sizeof buf), ST_INPUT);
    assert_int_equal(h5store_read_run_stored(f->path, "reentrant", &stored), ST_INPUT);
}

/* judge_report reads nothing by path: a report whose name is gone once it
 * is open is judged whole (the run list, /case, every run and tensor),
 * where judge_file, opening the path, finds nothing. */
static void test_judge_reads_a_report_through_its_one_handle(void **state)
{
    struct fixture *f = *state;
    write_small_report(f->path);
    struct h5report *rep;
    struct case_result *out = calloc(1, sizeof *out);
    assert_non_null(out);
    assert_int_equal(h5report_open(&rep, f->path), ST_OK);
    assert_int_equal(unlink(f->path), 0);
    uint64_t budget = 1 << 20;
    assert_int_equal(judge_report(rep, &budget, out), ST_OK);
    h5report_close(rep);
    assert_string_equal(out->name, "one_handle");
    assert_int_equal(out->n_results, 1);
    assert_true(out->results[0].expected);
    case_result_free(out);
    assert_int_equal(judge_file(f->path, NULL, out), ST_INPUT);
    assert_non_null(strstr(error_message(), "report.h5"));
    case_result_free(out);
    free(out);
}

/* Overwrites a dataset's data without touching its crc32: a bit flip on
 * disk, as far as a reader can tell. */
static void overwrite(const char *file, const char *dataset, const uint32_t *bits)
{
    hid_t f = H5Fopen(file, H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t ds = H5Dopen2(f, dataset, H5P_DEFAULT);
    assert_true(ds >= 0);
    assert_true(H5Dwrite(ds, H5T_NATIVE_UINT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, bits) >= 0);
    H5Dclose(ds);
    H5Fclose(f);
}

/* Every load verifies crc32: data that changed under it is a corrupt file,
 * named with the dataset, and nothing is handed back. */
static void test_data_changed_under_its_crc32_fails_the_load_naming_it(void **state)
{
    struct fixture *f = *state;
    uint32_t bits[4] = {1, 2, 3, 4}, flipped[4] = {1, 2, 3 ^ (1u << 7), 4};
    struct host_tensor a = f32_bits(bits, 4);
    struct h5store *s;
    assert_int_equal(h5store_create(&s, f->path), ST_OK);
    assert_int_equal(h5store_attr_int(s, "/", "schema_version", H5STORE_SCHEMA_VERSION), ST_OK);
    assert_int_equal(h5store_write_run_tensor(s, "baseline_0", "baseline_0", "steps/1/grads/w", &a, NULL), ST_OK);
    assert_int_equal(h5store_commit(s), ST_OK);
    overwrite(f->path, "/runs/baseline_0/steps/1/grads/w", flipped);
    struct run_record r;
    assert_int_equal(h5store_read_run_stored(f->path, "baseline_0", &r), ST_OK);
    struct tensor_hold h;
    assert_int_equal(run_tensor_acquire(&r, run_record_find(&r, "steps/1/grads/w"), &h), ST_INPUT);
    assert_non_null(strstr(error_message(), "report.h5: /runs/baseline_0/steps/1/grads/w: checksum mismatch (stored "
                                            "crc32 "));
    assert_non_null(strstr(error_message(), "): the file is corrupt"));
    assert_null(h.t.data);
    struct host_tensor t;
    assert_int_equal(h5store_read_tensor(f->path, "/runs/baseline_0/steps/1/grads/w", &t), ST_INPUT);
    run_record_free(&r);
    host_tensor_free(&a);
}

/* Two runs' paths that are one object are equal unread; the object is
 * still verified, once, by run_tensors_verify_unread: a corrupt dataset
 * every run links to is found. */
static void test_an_object_runs_share_is_verified_once_unread(void **state)
{
    struct fixture *f = *state;
    uint32_t bits[2] = {0x3f800000u, 0x40000000u}, flipped[2] = {0x3f800001u, 0x40000000u};
    struct host_tensor a = f32_bits(bits, 2);
    assert_int_equal(write_pair(f->path, &a, &a, "steps/1/grads/w"), 1);
    for (int corrupt = 0; corrupt < 2; corrupt++) {
        if (corrupt)
            overwrite(f->path, "/runs/baseline_0/steps/1/grads/w", flipped);
        struct checked_objects checked = {0};
        struct run_record runs[2];
        assert_int_equal(h5store_read_run_stored(f->path, "baseline_0", &runs[0]), ST_OK);
        assert_int_equal(h5store_read_run_stored(f->path, "run", &runs[1]), ST_OK);
        runs[0].checked = runs[1].checked = &checked;
        const struct run_tensor *t0 = run_record_find(&runs[0], "steps/1/grads/w");
        const struct run_tensor *t1 = run_record_find(&runs[1], "steps/1/grads/w");
        assert_true(run_tensors_same_object(&runs[0], t0, &runs[1], t1));
        if (!corrupt) {
            assert_int_equal(run_tensors_verify_unread(runs, 2), ST_OK);
            assert_int_equal(checked.n, 1); /* one object, read once for both paths */
            assert_true(checked_objects_has(&checked, &runs[1], t1));
        } else {
            assert_int_equal(run_tensors_verify_unread(runs, 2), ST_INPUT);
            assert_non_null(strstr(error_message(), "/runs/baseline_0/steps/1/grads/w: checksum mismatch"));
        }
        checked_objects_free(&checked);
        run_record_free(&runs[0]);
        run_record_free(&runs[1]);
    }
    host_tensor_free(&a);
}

/* The verified set keeps every object it is given, once, as it grows. */
static void test_checked_objects_keep_thousands_of_objects_once(void **state)
{
    (void)state;
    struct run_record r;
    run_record_init(&r, "run");
    r.source_dev = 1;
    r.source_ino = 2;
    struct checked_objects s = {0};
    struct run_tensor t;
    memset(&t, 0, sizeof t);
    for (int round = 0; round < 2; round++)
        for (uint32_t i = 1; i <= 5000; i++) {
            memcpy(t.object, &i, sizeof i);
            assert_int_equal(checked_objects_add(&s, &r, &t), ST_OK);
        }
    assert_int_equal(s.n, 5000);
    for (uint32_t i = 1; i <= 5001; i++) {
        memcpy(t.object, &i, sizeof i);
        assert_int_equal(checked_objects_has(&s, &r, &t), i <= 5000);
    }
    checked_objects_free(&s);
    run_record_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_identical_tensor_is_a_hard_link_to_the_reference, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_tensor_differing_in_one_bit_is_a_copy, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_crc32_collision_is_still_a_copy, setup, teardown),
        cmocka_unit_test_setup_teardown(test_same_bytes_in_another_shape_is_a_copy, setup, teardown),
        cmocka_unit_test_setup_teardown(test_every_run_dataset_carries_its_zlib_crc32, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stored_runs_know_linked_tensors_equal_unread, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stored_tensor_past_the_limit_is_refused_naming_it, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_held_source_loads_through_one_open_report, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_report_opened_once_reads_whole_after_its_name_is_gone, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_judge_reads_a_report_through_its_one_handle, setup, teardown),
        cmocka_unit_test_setup_teardown(test_data_changed_under_its_crc32_fails_the_load_naming_it, setup, teardown),
        cmocka_unit_test_setup_teardown(test_an_object_runs_share_is_verified_once_unread, setup, teardown),
        cmocka_unit_test(test_checked_objects_keep_thousands_of_objects_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
