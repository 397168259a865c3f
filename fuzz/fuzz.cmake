# libFuzzer targets (CKPT_FUZZ=ON, a build of its own: CC=clang). Only the
# torch-free modules they exercise are built, each straight into its fuzzer
# with -fsanitize=fuzzer,address,undefined; HDF5 and inih come as they are.
#   fuzz_case_file   bytes -> case file -> case loader (fuzz_case_file.c)
#   fuzz_h5_compare  bytes -> HDF5 file -> h5store readers -> compare
# Tests (label fuzz): fuzz.<target> fuzzes for CKPT_FUZZ_SECONDS from the
# seeds under tests/data/fuzz/<target>/ (fuzz/run_bounded.sh: findings in
# our code fail it, HDF5's own are reported); fuzz.regressions.<target>
# replays those files once (every crasher found is kept there).
if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR "CKPT_FUZZ=ON needs clang with libFuzzer: configure with CC=clang")
endif()
find_package(PkgConfig REQUIRED)
pkg_check_modules(HDF5 REQUIRED IMPORTED_TARGET hdf5-serial)
pkg_check_modules(INIH REQUIRED IMPORTED_TARGET inih)
pkg_check_modules(ZLIB REQUIRED IMPORTED_TARGET zlib)
pkg_check_modules(JANSSON REQUIRED IMPORTED_TARGET jansson)
set(CKPT_FUZZ_SECONDS 20 CACHE STRING "How long each bounded fuzz test runs")

set(FUZZ_FLAGS -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
# The judge side's case definition and loader, storage and compare
# (CMakeLists.txt lists them): torch-free by construction.
set(FUZZ_SOURCES ${CKPT_CASE_SOURCES} ${CKPT_BASE_SOURCES} ${CKPT_STORAGE_SOURCES} harness/judge/compare.c)

enable_testing()
foreach(target case_file h5_compare)
  add_executable(fuzz_${target} fuzz/fuzz_${target}.c ${FUZZ_SOURCES})
  target_include_directories(fuzz_${target} PRIVATE ${CKPT_JUDGE_INCLUDES} fuzz)
  target_compile_definitions(fuzz_${target} PRIVATE _POSIX_C_SOURCE=200809L)
  target_compile_options(fuzz_${target} PRIVATE -Wall -Wextra $<$<BOOL:${CKPT_WERROR}>:-Werror> ${FUZZ_FLAGS})
  target_link_options(fuzz_${target} PRIVATE ${FUZZ_FLAGS})
  target_link_libraries(fuzz_${target} PRIVATE PkgConfig::HDF5 PkgConfig::INIH PkgConfig::ZLIB PkgConfig::JANSSON m)

  set(seeds ${CMAKE_SOURCE_DIR}/tests/data/fuzz/${target})
  set(extra_seeds "")
  if(target STREQUAL "case_file")
    set(extra_seeds ${CMAKE_SOURCE_DIR}/cases)
  endif()
  # Working corpus and findings stay in the build tree; a finding in our
  # code fails the test and is then fixed and copied into the seeds.
  add_test(NAME fuzz.${target}
    COMMAND ${CMAKE_SOURCE_DIR}/fuzz/run_bounded.sh $<TARGET_FILE:fuzz_${target}> ${CKPT_FUZZ_SECONDS}
      ${CMAKE_BINARY_DIR}/fuzz-work/${target} ${seeds} ${extra_seeds})
  set_tests_properties(fuzz.${target} PROPERTIES LABELS "fuzz" TIMEOUT 900)
  add_test(NAME fuzz.regressions.${target}
    COMMAND bash -c "exec $<TARGET_FILE:fuzz_${target}> ${seeds}/*")
  set_tests_properties(fuzz.regressions.${target} PROPERTIES LABELS "fuzz")
endforeach()
