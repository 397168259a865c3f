/* fuzz_h5_compare: libFuzzer target for the HDF5 reader and compare. The
 * bytes are written to a file that goes through what `ckpt-verify diff`
 * does with its inputs: the file checks, the run list, reading each run,
 * its schema checks, and comparing runs. Every failure must be one message
 * line; nothing may crash, leak or read out of bounds; and a run compared
 * with itself must come out bitwise identical, NaNs included; and no HDF5
 * handle may stay open (HDF5 still references a forgotten handle, so no
 * leak report would show it). HDF5 itself is not instrumented: crashes
 * inside it show up, coverage does not, so the corpus starts from valid
 * files (tests/data/fuzz/h5_compare/). Findings inside HDF5 are sorted out
 * by fuzz/run_bounded.sh. */
#define _POSIX_C_SOURCE 200809L

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hdf5.h>

#include "compare.h"
#include "error.h"
#include "fuzz_util.h"
#include "h5store.h"
#include "run_record.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Enough to reach every code path; more runs only cost time. */
#define MAX_RUNS_READ 4

static void check_self_compare(const struct run_record *r)
{
    struct run_diff d;
    int st = compare_runs(r, r, NULL, &d);
    fuzz_check_message(st);
    if (st == ST_OK && (d.n_differ || d.n_missing || d.incomparable || d.has_divergence)) {
        fprintf(stderr, "run %s differs from itself (%d differ, first %s)\n", r->name, d.n_differ,
                d.first_path);
        abort();
    }
}

static void exercise(const char *path)
{
    int st = h5store_check_file(path);
    fuzz_check_message(st);
    if (st != ST_OK)
        return;
    char attr[256];
    fuzz_check_message(h5store_read_attr_str(path, "/", "case", attr, sizeof attr));
    struct host_tensor t;
    if ((st = h5store_read_tensor(path, "/inputs/x", &t)) == ST_OK)
        host_tensor_free(&t);
    fuzz_check_message(st);

    char (*names)[64] = NULL;
    int count = 0;
    st = h5store_list_runs(path, &names, &count);
    fuzz_check_message(st);
    if (st != ST_OK)
        return;
    struct run_record runs[MAX_RUNS_READ];
    int n = 0;
    for (int i = 0; i < count && n < MAX_RUNS_READ; i++) {
        st = h5store_read_run(path, names[i], &runs[n]);
        fuzz_check_message(st);
        if (st != ST_OK)
            continue;
        fuzz_check_message(h5store_check_run(path, &runs[n]));
        check_self_compare(&runs[n]);
        n++;
    }
    for (int i = 1; i < n; i++) {
        struct run_diff d;
        fuzz_check_message(compare_runs(&runs[0], &runs[i], NULL, &d));
    }
    for (int i = 0; i < n; i++)
        run_record_free(&runs[i]);
    free(names);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[4096];
    if (fuzz_write_temp(data, size, path, sizeof path) != 0)
        return 0;
    error_clear();
    exercise(path);
    unlink(path);
    /* Every reader opens and closes within the call: nothing may stay open. */
    ssize_t open = H5Fget_obj_count((hid_t)H5F_OBJ_ALL, H5F_OBJ_ALL);
    if (open != 0) {
        fprintf(stderr, "%zd HDF5 objects left open\n", open);
        abort();
    }
    return 0;
}
