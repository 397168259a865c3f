# Distributed runs (label `distributed`): verify(world_size=2, parallel=...)
# starts real torch.distributed ranks (gloo over 127.0.0.1) for DDP, FSDP
# and FSDP2 (tests/distributed/test_*.py, one CTest test per file; the
# cases and their expected verdicts are in docs/distributed.md). A file
# whose every test is skipped (NCCL without two GPUs) is Skipped (77), with
# pytest's reason in the output.
set(DIST_ENV "CKPT_VERIFY=$<TARGET_FILE:ckpt-verify>" "CKPT_ATEN_LIB=$<TARGET_FILE:ckpt_aten>")
foreach(spec ddp fsdp rng module_state rank_failures bad_input isolation nccl memory twins user_wrappers)
  add_test(NAME distributed.${spec}
    COMMAND ${CMAKE_SOURCE_DIR}/tests/distributed/run.sh ${CKPT_PYTHON}
      ${CMAKE_SOURCE_DIR}/tests/distributed/test_${spec}.py
    WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(distributed.${spec} PROPERTIES LABELS "distributed;python" ENVIRONMENT "${DIST_ENV}"
    SKIP_RETURN_CODE 77 TIMEOUT 300)
endforeach()
set_tests_properties(distributed.nccl PROPERTIES LABELS "distributed;python;gpu")

# The CLI on a distributed script: DDP's error and the static graph's hook
# count as expected, the rest PASS / NOISE, exit 0.
add_test(NAME distributed.cli_runs_a_ddp_script
  COMMAND ${CMAKE_SOURCE_DIR}/tests/expect.sh 0 "reentrant +ERROR +yes" "nonreentrant +PASS +yes"
  "nonreentrant_vs_single +NOISE +yes" "reentrant_static +FAIL +yes" "all verdicts as expected"
  -- ${CKPT_PYTHON} -m ckpt_verify --out ${CMAKE_BINARY_DIR}/python/cli/ddp_checkpoint.h5
  ${CMAKE_SOURCE_DIR}/python/examples/ddp_checkpoint.py)
set_tests_properties(distributed.cli_runs_a_ddp_script PROPERTIES LABELS "distributed;python"
  ENVIRONMENT "${DIST_ENV};PYTHONPATH=${CMAKE_SOURCE_DIR}/python" TIMEOUT 300)
