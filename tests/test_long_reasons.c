/* Reasons are never cut (issue 48): a run's message, warnings, class
 * patches and memory lists of any length reach its verdict's reason whole,
 * and a run's texts of any length are written and read back whole, in the
 * C writer's fixed-length strings and in the variable-length ones h5py
 * writes. */
#include <hdf5.h>
#include <stdlib.h>
#include <unistd.h>

#include "h5store.h"
#include "judge_fixture.h"

/* Words ("w0000001 w0000002 ...") up to n bytes, then marker: a text whose
 * every part, the last bytes included, can be found. */
static void words(struct text *t, size_t n, const char *marker)
{
    text_clear(t);
    for (int i = 1; text_len(t) + 9 <= n; i++)
        text_appendf(t, "w%07d ", i);
    text_append(t, marker);
}

static void two_baselines_and(struct fixture *f, const char *name)
{
    struct grads g;
    init(f);
    base_grads(&g);
    add_baselines(f, &g, 0);
    add(f, name, &g);
}

static void a_message_longer_than_20_kb_is_the_error_reason_whole(void **state)
{
    (void)state;
    struct fixture f;
    two_baselines_and(&f, "mine");
    struct run_record *run = &f.runs[2];
    snprintf(run->outcome, sizeof run->outcome, "%s", RUN_OUTCOME_ERROR);
    words(&run->message, 24000, "END-OF-THE-MESSAGE");
    assert_true(text_len(&run->message) > 20000);
    struct impl_result r = judge(&f, "mine");
    assert_int_equal(r.verdict, V_ERROR);
    assert_string_equal(text_str(&r.reason), text_str(&run->message));
    fixture_free(&f);
}

static void a_failed_checks_long_message_is_whole_in_reason_and_first_divergence(void **state)
{
    (void)state;
    struct fixture f;
    two_baselines_and(&f, "mine");
    struct run_record *run = &f.runs[2];
    snprintf(run->outcome, sizeof run->outcome, "%s", RUN_OUTCOME_CHECK_FAILED);
    words(&run->message, 21000, "LAST-OP-THAT-DIFFERED");
    words(&run->op_log, 6000, "LAST-ROW-OF-THE-OP-LOG");
    struct impl_result r = judge(&f, "mine");
    assert_int_equal(r.verdict, V_FAIL);
    const char *reason = text_str(&r.reason);
    assert_string_equal(reason + strlen("the checkpoint's own check failed: "), text_str(&run->message));
    assert_string_equal(text_str(&r.first_divergence), text_str(&run->message));
    assert_string_equal(text_str(&r.op_log), text_str(&run->op_log));
    fixture_free(&f);
}

/* A user's run that holds extras beyond its statement: MEMFAIL naming every
 * extra, however long the list. */
static void a_users_long_memory_list_is_whole_in_the_memfail_reason(void **state)
{
    (void)state;
    struct fixture f;
    two_baselines_and(&f, "mine");
    struct run_record *run = &f.runs[2];
    run_record_set_attr(&f.runs[0], "memory.end_forward_bytes", 1e6);
    run_record_set_attr(run, "memory.end_forward_bytes", 700000);
    run_record_set_attr(run, "memory.judged_held_bytes", 700000);
    run_record_set_attr(run, "memory.judged_baseline_held_bytes", 1e6);
    run_record_set_attr(run, "memory.stated_end_forward_bytes", 100000);
    run_record_set_attr(run, "memory.max_saving_bytes", 300000);
    run_record_set_attr(run, "memory.extra_bytes", 600000);
    words(&run->memory_extra, 12000, "blocks.99.mlp aten.gelu#0 (LAST EXTRA)");
    words(&run->memory_state, 9000, "LAST STATE TENSOR");
    struct impl_result r = judge(&f, "mine");
    assert_int_equal(r.verdict, V_MEMFAIL);
    assert_non_null(strstr(text_str(&r.reason), text_str(&run->memory_extra)));
    assert_string_equal(text_str(&r.memory_extra), text_str(&run->memory_extra));
    assert_string_equal(text_str(&r.memory_state), text_str(&run->memory_state));
    fixture_free(&f);
}

/* The class patches (said first), the message, the run's warning and the
 * baseline's warning, 10 KB each: the reason is all four, in that order. */
static void a_reason_of_several_long_parts_is_not_cut(void **state)
{
    (void)state;
    struct fixture f;
    two_baselines_and(&f, "mine");
    struct run_record *run = &f.runs[2];
    snprintf(run->outcome, sizeof run->outcome, "%s", RUN_OUTCOME_ERROR);
    words(&run->class_patches, 10000, "PATCHES-END");
    words(&run->message, 10000, "MESSAGE-END");
    words(&run->warning, 10000, "WARNING-END");
    words(&f.runs[0].warning, 10000, "BASELINE-WARNING-END");
    struct impl_result r = judge(&f, "mine");
    struct text want = {0};
    text_setf(&want, "%s; %s [warning: %s] [baseline warning: %s]", text_str(&run->class_patches),
              text_str(&run->message), text_str(&run->warning), text_str(&f.runs[0].warning));
    assert_true(text_len(&want) > 40000);
    assert_string_equal(text_str(&r.reason), text_str(&want));
    text_free(&want);
    fixture_free(&f);
}

/* ---- storage ------------------------------------------------------------- */

struct report_file {
    char dir[512], path[600];
};

static void report_file_make(struct report_file *rf)
{
    const char *base = getenv("TMPDIR");
    snprintf(rf->dir, sizeof rf->dir, "%s/test_long_reasons.XXXXXX", base && base[0] ? base : "/tmp");
    assert_non_null(mkdtemp(rf->dir));
    snprintf(rf->path, sizeof rf->path, "%s/report.h5", rf->dir);
}

static void report_file_remove(struct report_file *rf)
{
    unlink(rf->path);
    rmdir(rf->dir);
}

/* A report holding run "mine", its message `message`, written by the C
 * writer (fixed-length strings). */
static void write_run_with_message(const char *path, const char *message)
{
    struct h5store *s = NULL;
    assert_ok(h5store_create(&s, path));
    assert_ok(h5store_attr_int(s, "/", "schema_version", H5STORE_SCHEMA_VERSION));
    struct run_record r;
    run_record_init(&r, "mine");
    float loss = 0.5f;
    add_f32(&r, "steps/1/loss", &loss, 1);
    snprintf(r.outcome, sizeof r.outcome, "%s", RUN_OUTCOME_ERROR);
    assert_ok(text_set(&r.message, message));
    assert_ok(h5store_write_run(s, &r));
    assert_ok(h5store_commit(s));
    run_record_free(&r);
}

/* Run "mine" of the report at path, read back: its message is `message`, whole. */
static void assert_message_reads_back_whole(const char *path, const char *message)
{
    struct run_record back;
    assert_ok(h5store_read_run(path, "mine", &back));
    assert_string_equal(text_str(&back.message), message);
    run_record_free(&back);
}

static void a_40_kb_message_from_the_c_writer_reads_back_whole(void **state)
{
    (void)state;
    struct report_file rf;
    report_file_make(&rf);
    struct text message = {0};
    words(&message, 40960, "END-OF-A-40-KB-MESSAGE");
    write_run_with_message(rf.path, text_str(&message));
    assert_message_reads_back_whole(rf.path, text_str(&message));
    text_free(&message);
    report_file_remove(&rf);
}

/* Past H5STORE_FIXED_STRING_MAX bytes (an object header holds at most 64
 * KiB) the writer stores a text variable-length: still whole. */
static void a_100_kb_message_from_the_c_writer_is_variable_length_and_whole(void **state)
{
    (void)state;
    struct report_file rf;
    report_file_make(&rf);
    struct text message = {0};
    words(&message, 100000, "END-OF-A-100-KB-MESSAGE");
    assert_true(text_len(&message) > H5STORE_FIXED_STRING_MAX);
    write_run_with_message(rf.path, text_str(&message));
    hid_t file = H5Fopen(rf.path, H5F_ACC_RDONLY, H5P_DEFAULT);
    assert_true(file >= 0);
    hid_t a = H5Aopen_by_name(file, "/runs/mine", "message", H5P_DEFAULT, H5P_DEFAULT);
    hid_t type = H5Aget_type(a);
    assert_true(H5Tis_variable_str(type) > 0);
    H5Tclose(type);
    H5Aclose(a);
    H5Fclose(file);
    assert_message_reads_back_whole(rf.path, text_str(&message));
    text_free(&message);
    report_file_remove(&rf);
}

static void a_40_kb_variable_length_message_as_h5py_writes_it_reads_back_whole(void **state)
{
    (void)state;
    struct report_file rf;
    report_file_make(&rf);
    struct text message = {0};
    words(&message, 40960, "END-OF-A-40-KB-H5PY-MESSAGE");
    write_run_with_message(rf.path, "short");
    /* h5py stores a str attribute as a variable-length UTF-8 string. */
    hid_t file = H5Fopen(rf.path, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(file >= 0);
    hid_t run = H5Gopen2(file, "/runs/mine", H5P_DEFAULT);
    assert_true(run >= 0);
    assert_true(H5Adelete(run, "message") >= 0);
    hid_t type = H5Tcopy(H5T_C_S1), scalar = H5Screate(H5S_SCALAR);
    assert_true(H5Tset_size(type, H5T_VARIABLE) >= 0 && H5Tset_cset(type, H5T_CSET_UTF8) >= 0);
    hid_t a = H5Acreate2(run, "message", type, scalar, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(a >= 0);
    const char *value = text_str(&message);
    assert_true(H5Awrite(a, type, &value) >= 0);
    H5Aclose(a);
    H5Sclose(scalar);
    H5Tclose(type);
    H5Gclose(run);
    H5Fclose(file);
    assert_message_reads_back_whole(rf.path, text_str(&message));
    text_free(&message);
    report_file_remove(&rf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_message_longer_than_20_kb_is_the_error_reason_whole),
        cmocka_unit_test(a_failed_checks_long_message_is_whole_in_reason_and_first_divergence),
        cmocka_unit_test(a_users_long_memory_list_is_whole_in_the_memfail_reason),
        cmocka_unit_test(a_reason_of_several_long_parts_is_not_cut),
        cmocka_unit_test(a_40_kb_message_from_the_c_writer_reads_back_whole),
        cmocka_unit_test(a_40_kb_variable_length_message_as_h5py_writes_it_reads_back_whole),
        cmocka_unit_test(a_100_kb_message_from_the_c_writer_is_variable_length_and_whole),
    };
    return cmocka_run_group_tests(tests, NULL, free_kept_results);
}
