# test_env.cmake: the environment every CTest test of this project runs in,
# set in one place. CMakeLists.txt calls ckpt_apply_test_environment() after
# the last add_test; tests/gen_case_tests.cmake writes the same environment
# into the per-case tests it generates (CKPT_TEST_ENVIRONMENT, passed to it).
#
# Threads: libtorch starts one intra-op thread per core, so `ctest -jN` on an
# N-core machine would run N processes of N threads each (on 16 cores the
# nightly label took 102 s that way, 3.3 s pinned). Every test process is
# pinned to CKPT_TEST_THREADS threads instead. A test that needs more asks
# the harness for them (--threads N, or `threads = N` in its case: the
# harness calls at::set_num_threads, which overrides the environment) and
# says so with the PROCESSORS property, so ctest -j counts them.

set(CKPT_TEST_THREADS 1 CACHE STRING "Intra-op threads (OMP_NUM_THREADS) of every CTest test process")
if(NOT CKPT_TEST_THREADS MATCHES "^[1-9][0-9]*$")
  message(FATAL_ERROR "CKPT_TEST_THREADS='${CKPT_TEST_THREADS}': expected a positive integer")
endif()
set(CKPT_TEST_ENVIRONMENT OMP_NUM_THREADS=${CKPT_TEST_THREADS} MKL_NUM_THREADS=${CKPT_TEST_THREADS}
    OPENBLAS_NUM_THREADS=${CKPT_TEST_THREADS})

# Puts CKPT_TEST_ENVIRONMENT in front of every test's own ENVIRONMENT (a
# test's own setting of the same variable comes later and wins).
function(ckpt_apply_test_environment)
  get_property(tests DIRECTORY PROPERTY TESTS)
  foreach(test IN LISTS tests)
    get_property(own TEST ${test} PROPERTY ENVIRONMENT)
    set_property(TEST ${test} PROPERTY ENVIRONMENT ${CKPT_TEST_ENVIRONMENT} ${own})
  endforeach()
endfunction()

# ckpt_add_test_needing(NAME TOOLS tool... COMMAND ...): add_test for a test
# that needs programs the build does not (gnuplot, for instance). They are
# looked for on PATH when the test runs; where one is absent the test is
# reported Skipped with a line naming it, instead of failing.
function(ckpt_add_test_needing name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "TOOLS;COMMAND")
  if(NOT arg_TOOLS OR NOT arg_COMMAND OR arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "ckpt_add_test_needing(${name} TOOLS tool... COMMAND ...)")
  endif()
  add_test(NAME ${name} COMMAND ${CMAKE_SOURCE_DIR}/tests/needs.sh ${arg_TOOLS} -- ${arg_COMMAND})
  set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77)
endfunction()
