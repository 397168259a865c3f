/* Unit tests for blas_info: how the BLAS found at run time is named, and
 * that what is found is a library this process really has mapped. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "aten/aten.h"
#include "blas_info.h"

static void openblas_is_named_by_its_config_and_threading(void **state)
{
    (void)state;
    struct blas_info b;
    blas_info_name(&b, "/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3",
                   "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Haswell MAX_THREADS=64", 1);
    assert_string_equal(b.name, "OpenBLAS 0.3.21 (pthread)");
    assert_string_equal(b.path, "/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3");
    assert_false(b.is_reference);
    assert_null(blas_info_warning(&b));
    blas_info_name(&b, "/opt/lib/libopenblas.so.0", "OpenBLAS 0.3.26 NO_AFFINITY", 2);
    assert_string_equal(b.name, "OpenBLAS 0.3.26 (OpenMP)");
}

static void mkl_linked_into_libtorch_is_named_by_its_release(void **state)
{
    (void)state;
    struct blas_info b;
    blas_info_name_mkl(&b, "/venv/lib/python3.11/site-packages/torch/lib/libtorch_cpu.so",
                       "Intel(R) oneAPI Math Kernel Library Version 2024.2-Product Build 20240605 for Intel(R) 64 "
                       "architecture applications");
    assert_string_equal(b.name, "Intel MKL 2024.2 (in libtorch_cpu.so)");
    assert_false(b.is_reference);
    assert_null(blas_info_warning(&b));
    blas_info_name_mkl(&b, "/x/libmkl_rt.so.2", "garbled");
    assert_string_equal(b.name, "Intel MKL (in libmkl_rt.so.2)");
}

static void openblas_threading_falls_back_to_debians_directory(void **state)
{
    (void)state;
    struct blas_info b;
    blas_info_name(&b, "/usr/lib/x86_64-linux-gnu/openblas-serial/libblas.so.3", "OpenBLAS 0.3.21", -1);
    assert_string_equal(b.name, "OpenBLAS 0.3.21 (serial)");
    blas_info_name(&b, "/somewhere/libopenblas.so.0", "OpenBLAS 0.3.21", -1);
    assert_string_equal(b.name, "OpenBLAS 0.3.21");
}

static void debians_reference_blas_is_named_and_warned_about(void **state)
{
    (void)state;
    struct blas_info b;
    blas_info_name(&b, "/usr/lib/x86_64-linux-gnu/blas/libblas.so.3.11.0", NULL, -1);
    assert_string_equal(b.name, "reference BLAS (libblas3)");
    assert_true(b.is_reference);
    assert_non_null(blas_info_warning(&b));
    assert_non_null(strstr(blas_info_warning(&b), "install libopenblas0-pthread"));
    assert_null(strchr(blas_info_warning(&b), '\n'));
}

static void an_unknown_library_is_named_by_its_file_without_a_warning(void **state)
{
    (void)state;
    struct blas_info b;
    blas_info_name(&b, "/opt/vendor/lib/libblis.so.4", NULL, -1);
    assert_string_equal(b.name, "BLAS from libblis.so.4");
    assert_false(b.is_reference);
    assert_null(blas_info_warning(&b));
    /* A libblas.so in another directory is not known to be the reference. */
    blas_info_name(&b, "/usr/lib/x86_64-linux-gnu/atlas/libblas.so.3", NULL, -1);
    assert_false(b.is_reference);
}

static void no_sgemm_says_so(void **state)
{
    (void)state;
    struct blas_info b;
    blas_info_name(&b, NULL, NULL, -1);
    assert_string_equal(b.path, "");
    assert_non_null(strstr(b.name, "no sgemm_"));
    assert_false(b.is_reference);
}

/* libtorch calls BLAS, so where the shim is loaded (the call below keeps
 * it linked) a library provides sgemm_, and it is one of the files mapped
 * into the process. */
static void detects_a_library_mapped_into_this_process(void **state)
{
    (void)state;
    assert_non_null(aten_libtorch_version());
    struct blas_info b;
    blas_info_detect(&b);
    assert_true(b.path[0] == '/');
    FILE *maps = fopen("/proc/self/maps", "r");
    assert_non_null(maps);
    char line[4096];
    int mapped = 0;
    while (!mapped && fgets(line, sizeof line, maps)) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        size_t n = strlen(line), m = strlen(b.path);
        mapped = n >= m && strcmp(line + n - m, b.path) == 0;
    }
    fclose(maps);
    assert_true(mapped);
    if (strstr(b.path, "openblas"))
        assert_int_equal(strncmp(b.name, "OpenBLAS ", 9), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(openblas_is_named_by_its_config_and_threading),
        cmocka_unit_test(mkl_linked_into_libtorch_is_named_by_its_release),
        cmocka_unit_test(openblas_threading_falls_back_to_debians_directory),
        cmocka_unit_test(debians_reference_blas_is_named_and_warned_about),
        cmocka_unit_test(an_unknown_library_is_named_by_its_file_without_a_warning),
        cmocka_unit_test(no_sgemm_says_so),
        cmocka_unit_test(detects_a_library_mapped_into_this_process),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
