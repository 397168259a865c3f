/* Unit tests for torch_runtime: how the running torch's version is read
 * from its version files, and that this process's own libtorch is the one
 * it was compiled against. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "aten/aten.h"
#include "aten/torch_runtime.h"
#include "error.h"

static void a_wheels_version_py_gives_version_and_cuda(void **state)
{
    (void)state;
    struct torch_runtime rt;
    assert_true(torch_runtime_parse(&rt, "from typing import Optional\n\n__all__ = ['__version__', 'cuda']\n"
                                         "__version__ = '2.11.0+cu130'\ndebug = False\n"
                                         "cuda: Optional[str] = '13.0'\ngit_version = 'abc'\n"));
    assert_string_equal(rt.version, "2.11.0+cu130");
    assert_string_equal(rt.cuda, "13.0");
}

static void a_cpu_wheel_has_cuda_none(void **state)
{
    (void)state;
    struct torch_runtime rt;
    assert_true(torch_runtime_parse(&rt, "__version__ = \"2.9.0+cpu\"\ncuda = None\n"));
    assert_string_equal(rt.version, "2.9.0+cpu");
    assert_string_equal(rt.cuda, "none");
}

static void a_libtorch_build_version_file_gives_the_cuda_of_its_tag(void **state)
{
    (void)state;
    struct torch_runtime rt;
    assert_true(torch_runtime_parse(&rt, "2.11.0+cu130\n"));
    assert_string_equal(rt.version, "2.11.0+cu130");
    assert_string_equal(rt.cuda, "13.0");
    assert_true(torch_runtime_parse(&rt, "2.9.0+cu128\n"));
    assert_string_equal(rt.cuda, "12.8");
    assert_true(torch_runtime_parse(&rt, "2.9.0+cpu"));
    assert_string_equal(rt.cuda, "none");
}

static void text_with_no_version_is_not_a_version(void **state)
{
    (void)state;
    struct torch_runtime rt;
    assert_false(torch_runtime_parse(&rt, ""));
    assert_false(torch_runtime_parse(&rt, "# nothing here\n"));
    assert_false(torch_runtime_parse(&rt, "__version__ = 2.11\n")); /* unquoted */
    assert_string_equal(rt.version, "unknown");
}

static void this_process_runs_the_torch_it_was_compiled_against(void **state)
{
    (void)state;
    assert_int_equal(aten_init(), ST_OK);
    struct torch_runtime rt;
    assert_int_equal(torch_runtime_read(&rt), ST_OK);
    assert_non_null(strstr(rt.library, "libtorch_cpu.so"));
    assert_string_equal(rt.version, torch_compiled_version());
    assert_string_equal(rt.cuda, torch_compiled_cuda());
    assert_int_equal(torch_runtime_check(), ST_OK);
    /* The pin was read from env/requirements.txt: a release ("2.11.0"). A
     * build against another torch (a GPU machine's own) may differ from it. */
    assert_true(strlen(torch_pinned_version()) >= 3);
    assert_int_equal(strspn(torch_pinned_version(), "0123456789."), strlen(torch_pinned_version()));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_wheels_version_py_gives_version_and_cuda),
        cmocka_unit_test(a_cpu_wheel_has_cuda_none),
        cmocka_unit_test(a_libtorch_build_version_file_gives_the_cuda_of_its_tag),
        cmocka_unit_test(text_with_no_version_is_not_a_version),
        cmocka_unit_test(this_process_runs_the_torch_it_was_compiled_against),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
