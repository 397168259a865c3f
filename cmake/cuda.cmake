# cuda.cmake: the CUDA parts of the build, included at the end of
# CMakeLists.txt (after ckpt_aten, ckpt_core and enable_testing()).
#
# CKPT_CUDA = AUTO | ON | OFF, together with the libtorch that was found,
# picks one of three modes (CKPT_CUDA_MODE):
#
#   full   libtorch has CUDA (PyTorch's own, which defines target torch_cuda)
#          and nvcc exists: harness/cuda/*.cu are built into ckpt_cuda and
#          linked into the core; CKPT_WITH_CUDA is defined for the shim, the
#          core (ops.c calls the kernels) and the tests; cuda:N devices work.
#   check  libtorch without CUDA (Debian's) and nvcc exists: every .cu file,
#          and the CUDA branches of the C files that call the kernels, are
#          compiled (object library cuda_compile_check, part of `all`) and
#          linked into nothing, so a machine with no GPU still catches a
#          kernel that does not compile. The CPU binary has no CUDA in it.
#   none   no CUDA compiled; asking for cuda:N is a one-line error (exit 2).
#
#   AUTO   full or check when nvcc is found, else none (a CUDA libtorch
#          without nvcc is a configure error: its kernels could not be built;
#          pass CKPT_CUDA=OFF for a CPU-only harness).
#   ON     like AUTO, but no nvcc is a configure error.
#   OFF    none, whatever libtorch has.
#
# nvcc is looked for as CMake does (CMAKE_CUDA_COMPILER, $CUDACXX, PATH) and
# then in $CUDA_HOME/bin and /usr/local/cuda/bin. No -ccbin and no
# -allow-unsupported-compiler: nvcc 13.0 takes gcc 12 (Debian bookworm) and
# gcc 13 (Ubuntu 24.04) as its host compiler as they are.

set(CKPT_CUDA AUTO CACHE STRING "CUDA parts: AUTO, ON or OFF (see cmake/cuda.cmake)")
set_property(CACHE CKPT_CUDA PROPERTY STRINGS AUTO ON OFF)
# sm_90 machine code for the H100 the GPU tests run on, plus compute_75 PTX
# (the oldest architecture CUDA 13 targets) that any newer GPU JIT-compiles.
set(CKPT_CUDA_ARCHITECTURES "90-real;75-virtual" CACHE STRING
  "CUDA_ARCHITECTURES of the harness's kernels")

if(NOT CKPT_CUDA MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "CKPT_CUDA='${CKPT_CUDA}': expected AUTO, ON or OFF")
endif()

set(CKPT_TORCH_HAS_CUDA OFF)
if(TORCH_CUDA_LIBRARIES OR TARGET torch_cuda)
  set(CKPT_TORCH_HAS_CUDA ON)
endif()

set(CKPT_CUDA_MODE none)
if(NOT CKPT_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER_LOADED)
    if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX})
      find_program(CKPT_NVCC nvcc PATHS ENV CUDA_HOME /usr/local/cuda PATH_SUFFIXES bin)
      if(CKPT_NVCC)
        # check_language's trial project reads the compiler from CUDACXX.
        set(ENV{CUDACXX} "${CKPT_NVCC}")
      endif()
    endif()
    include(CheckLanguage)
    check_language(CUDA)
  endif()
  if(CMAKE_CUDA_COMPILER)
    # The kernels call only the runtime; link the shared one, the same
    # libcudart that libtorch loads, never a second static copy.
    set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
    enable_language(CUDA)
    if(CKPT_TORCH_HAS_CUDA)
      set(CKPT_CUDA_MODE full)
    else()
      set(CKPT_CUDA_MODE check)
    endif()
  elseif(CKPT_CUDA STREQUAL "ON")
    message(FATAL_ERROR "CKPT_CUDA=ON but no working nvcc was found (PATH, CUDACXX, CUDA_HOME, /usr/local/cuda/bin); "
                        "set CMAKE_CUDA_COMPILER, or CKPT_CUDA=OFF")
  elseif(CKPT_TORCH_HAS_CUDA)
    message(FATAL_ERROR "libtorch has CUDA but no nvcc was found to build the harness's CUDA kernels; "
                        "set CMAKE_CUDA_COMPILER (or CUDACXX), or CKPT_CUDA=OFF for a CPU-only harness")
  endif()
endif()
message(STATUS "ckpt-verify CUDA: ${CKPT_CUDA_MODE} (CKPT_CUDA=${CKPT_CUDA}, libtorch with CUDA: "
               "${CKPT_TORCH_HAS_CUDA}, nvcc: ${CMAKE_CUDA_COMPILER} ${CMAKE_CUDA_COMPILER_VERSION})")

set(CKPT_CUDA_SOURCES harness/cuda/fused_bias_gelu.cu harness/cuda/bias_dropout_add.cu)
set(CKPT_CUDA_FLAGS -Xcompiler=-Wall,-Wextra)
if(CKPT_WERROR)
  list(APPEND CKPT_CUDA_FLAGS --Werror=all-warnings -Xcompiler=-Werror)
endif()

function(ckpt_cuda_target_setup target)
  set_target_properties(${target} PROPERTIES
    CUDA_ARCHITECTURES "${CKPT_CUDA_ARCHITECTURES}"
    CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON
    POSITION_INDEPENDENT_CODE ON)
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:${CKPT_CUDA_FLAGS}>)
endfunction()

if(CKPT_CUDA_MODE STREQUAL "full")
  find_package(CUDAToolkit REQUIRED)
  add_library(ckpt_cuda STATIC ${CKPT_CUDA_SOURCES})
  ckpt_cuda_target_setup(ckpt_cuda)
  target_include_directories(ckpt_cuda PUBLIC ${CKPT_HARNESS_INCLUDES})
  # error_set lives in ckpt_aten.
  target_link_libraries(ckpt_cuda PUBLIC ckpt_aten CUDA::cudart)
  target_compile_definitions(ckpt_aten PRIVATE CKPT_WITH_CUDA=1)
  target_compile_definitions(ckpt_core PUBLIC CKPT_WITH_CUDA=1)
  target_link_libraries(ckpt_core PUBLIC ckpt_cuda)
elseif(CKPT_CUDA_MODE STREQUAL "check")
  # Compiled, never linked: the kernels, the CUDA branch of ops.c and the
  # CUDA kernel tests (they only run in a full build on a GPU).
  add_library(cuda_compile_check OBJECT ${CKPT_CUDA_SOURCES} harness/autograd/ops.c tests/test_cuda_kernels.c)
  ckpt_cuda_target_setup(cuda_compile_check)
  target_include_directories(cuda_compile_check PRIVATE ${CKPT_HARNESS_INCLUDES} impls)
  target_compile_definitions(cuda_compile_check PRIVATE CKPT_WITH_CUDA=1 _POSIX_C_SOURCE=200809L)
  target_compile_options(cuda_compile_check PRIVATE $<$<COMPILE_LANGUAGE:C>:${CKPT_C_WARNINGS}>)
  target_link_libraries(cuda_compile_check PRIVATE PkgConfig::CMOCKA)

  # The shim's CUDA branch, against this libtorch's own CUDA headers where it
  # ships them (Debian's does, less the generated cuda_cmake_macros.h, which
  # is written here): a machine without a GPU also catches a shim that no
  # longer compiles with CKPT_WITH_CUDA. Compiled, never linked.
  find_path(CKPT_ATEN_CUDA_HEADERS ATen/cuda/CUDAGeneratorImpl.h HINTS ${TORCH_INCLUDE_DIRS})
  if(CKPT_ATEN_CUDA_HEADERS)
    set(_stub ${CMAKE_BINARY_DIR}/cuda-check-include)
    file(WRITE ${_stub}/c10/cuda/impl/cuda_cmake_macros.h "#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n")
    add_library(cuda_shim_compile_check OBJECT harness/aten/shim.cpp harness/aten/aten_devices.cpp
      harness/aten/aten_tensors.cpp harness/aten/aten_ops.cpp)
    target_include_directories(cuda_shim_compile_check PRIVATE ${CKPT_HARNESS_INCLUDES})
    target_include_directories(cuda_shim_compile_check SYSTEM PRIVATE ${_stub}
      ${CMAKE_CUDA_TOOLKIT_INCLUDE_DIRECTORIES})
    target_compile_definitions(cuda_shim_compile_check PRIVATE CKPT_WITH_CUDA=1 _POSIX_C_SOURCE=200809L)
    target_compile_options(cuda_shim_compile_check PRIVATE ${TORCH_CXX_FLAGS})
    target_link_libraries(cuda_shim_compile_check PRIVATE ${TORCH_LIBRARIES})
  endif()
endif()

# ---- tests ---------------------------------------------------------------------
# The CUDA kernels against the CPU kernel (tests/test_cuda_kernels.c): built in
# every mode, run for real only in a full build with a device. Otherwise the
# GPU tests are cmocka skip()s (the few that need no GPU still run and can
# fail) and the binary exits 77 with the reason: CTest reports it skipped.
add_executable(test_cuda_kernels tests/test_cuda_kernels.c)
target_compile_options(test_cuda_kernels PRIVATE ${CKPT_C_WARNINGS} ${CKPT_SAN_FLAGS})
target_link_libraries(test_cuda_kernels PRIVATE ckpt_core PkgConfig::CMOCKA m)
add_test(NAME unit.cuda_kernels COMMAND test_cuda_kernels)
set_tests_properties(unit.cuda_kernels PROPERTIES LABELS "unit;gpu" SKIP_RETURN_CODE 77)

set(CKPT_EXPECT ${CMAKE_SOURCE_DIR}/tests/expect.sh)
if(CKPT_CUDA_MODE STREQUAL "full")
  # The README's triage case moved to the GPU with --device; without a device
  # it is reported skipped, not failed. (The cases of cases/gpu.ini get one
  # test each from tests/nightly.cmake; scripts/gpu-build.sh runs --suite gpu.)
  add_test(NAME gpu.bias_gelu_bs1_cuda0
    COMMAND ${CKPT_EXPECT} 0 "all verdicts as expected"
    -- $<TARGET_FILE:ckpt-verify> --case bias_gelu_bs1 --device cuda:0 --out ${CMAKE_BINARY_DIR}/it/gpu_bs1)
  set_tests_properties(gpu.bias_gelu_bs1_cuda0 PROPERTIES
    LABELS gpu SKIP_REGULAR_EXPRESSION "requested but 0 CUDA device" FIXTURES_SETUP gpu_bs1)
  # The first matmul of a process allocates cuBLAS's workspace (32 MiB): the
  # warm-up must keep it out of baseline_0's bytes held at end of forward.
  # Skipped with the fixture's reason where the fixture was skipped (no device).
  add_test(NAME gpu.bias_gelu_bs1_end_forward_matches_prediction
    COMMAND bash -c "if [ ! -e ${CMAKE_BINARY_DIR}/it/gpu_bs1/summary.json ]; then echo 'skipped: no report from gpu.bias_gelu_bs1_cuda0 (no CUDA device)'; exit 77; fi; exec ${CKPT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/check_predictions.py ${CMAKE_BINARY_DIR}/it/gpu_bs1 0.05")
  set_tests_properties(gpu.bias_gelu_bs1_end_forward_matches_prediction PROPERTIES
    LABELS gpu FIXTURES_REQUIRED gpu_bs1 SKIP_RETURN_CODE 77)
else()
  # A build without CUDA asked for a case naming a cuda device (as device or
  # as draw_device, or a whole suite of them): one line naming the case's
  # file and line, nothing on stdout, exit 2, before any report is written.
  set(gpu_refusals
    "gpu_case_needs_cuda_build|--case gpu_fp32_bias_gelu_bs1|gpu_fp32_bias_gelu_bs1: device cuda:0 requested but this libtorch has no CUDA \\(device = cuda:0\\)$"
    "draw_device_needs_cuda_build|--case gpu_draw_cuda_rng_args|gpu_draw_cuda_rng_args: device cuda:0 requested but this libtorch has no CUDA \\(draw_device = cuda:0\\)$"
    "gpu_suite_needs_cuda_build|--suite gpu|gpu_fp32_none_bs1: device cuda:0 requested")
  foreach(refusal IN LISTS gpu_refusals)
    string(REPLACE "|" ";" parts "${refusal}")
    list(GET parts 0 name)
    list(GET parts 1 selection)
    list(GET parts 2 regex)
    set(out ${CMAKE_BINARY_DIR}/it/${name})
    add_test(NAME cli.${name}
      COMMAND bash -c "rm -rf ${out} && ${CMAKE_SOURCE_DIR}/tests/expect_error.sh 2 '^ckpt-verify: .*cases/gpu\\.ini:[0-9]+: case ${regex}' -- $<TARGET_FILE:ckpt-verify> ${selection} --out ${out} && test ! -e ${out}")
  endforeach()
endif()
