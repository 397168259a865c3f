# JAX on XLA:CPU (labels `xla` and `jax`): python/examples/jax_checkpoints.py's
# jax.checkpoint variants under jax.jit through
# ckpt_verify.frontends.jax.verify_jax in the JAX environment (.venv-jax),
# each judged by the C judge from its gradients and XLA's own evidence
# (docs/xla.md, "JAX"). Without .venv-jax each test is Skipped with the
# reason (tests/jax/run.sh exits 77).
set(JAX_OUT ${CMAKE_BINARY_DIR}/jax)
set(JAX_ENV "CKPT_VERIFY=$<TARGET_FILE:ckpt-verify>")
# name | run | verdict | reason regex | keep barriers (1) or XLA:CPU's default pipeline (0)
set(JAX_TESTS
  "prevent_cse_keeps_the_recompute_and_saves|prevent_cse|PASS|recompute kept by XLA in 4 region[(]s[)]: [0-9]+ op[(]s[)] marked as recompute after optimization, 72 traced, XLA temp buffers 0[.][0-9]+x baseline|0"
  "prevent_cse_with_barriers_kept_saves_more|prevent_cse|PASS|recompute kept by XLA in 4 region[(]s[)]: [0-9]+ op[(]s[)] marked as recompute after optimization, 72 traced, XLA temp buffers 0[.][0-4][0-9]x baseline|1"
  "no_prevent_cse_is_merged_by_cse|no_prevent_cse|MEMFAIL|XLA merged the recompute of 4 region[(]s[)] into the forward [(]CSE[)]: the optimized step has ([0-9]+) instructions, no more than the plain baseline's .*1[.]00x baseline|0"
  "checkpoint_dots_keeps_the_recompute_and_saves|checkpoint_dots|PASS|recompute kept by XLA in 4 region[(]s[)]: [0-9]+ op[(]s[)] marked as recompute after optimization, [0-9]+ traced, XLA temp buffers 0[.][0-9]+x baseline|0"
  "planted_recompute_dropping_a_bias_fails|planted_recompute_drops_bias|FAIL|^(differs in [0-9]+ of [0-9]+ attempts[^:]*: )?steps/1/grads/|0"
)
foreach(spec ${JAX_TESTS})
  string(REPLACE "|" ";" parts "${spec}")
  list(GET parts 0 name)
  list(GET parts 1 run)
  list(GET parts 2 verdict)
  list(GET parts 3 reason)
  list(GET parts 4 keep)
  set(extra "")
  if(keep)
    set(extra --keep-barriers)
  endif()
  add_test(NAME jax.${name}
    COMMAND ${CMAKE_SOURCE_DIR}/tests/jax/run.sh ${CMAKE_SOURCE_DIR}/tests/jax/check_jax_case.py
      ${run} ${verdict} --reason "${reason}" ${extra} --out-dir ${JAX_OUT}/${name})
  # Its report is one of the bytes plot's (tests/xla.cmake).
  set_tests_properties(jax.${name} PROPERTIES LABELS "xla;jax" ENVIRONMENT "${JAX_ENV}" SKIP_RETURN_CODE 77
    FIXTURES_SETUP xla_reports)
endforeach()
add_test(NAME jax.checkpointed_baseline_is_refused
  COMMAND ${CMAKE_SOURCE_DIR}/tests/jax/run.sh ${CMAKE_SOURCE_DIR}/tests/jax/check_jax_case.py
    prevent_cse --checkpointed-baseline --out-dir ${JAX_OUT}/checkpointed_baseline)
set_tests_properties(jax.checkpointed_baseline_is_refused PROPERTIES LABELS "xla;jax" ENVIRONMENT "${JAX_ENV}"
  SKIP_RETURN_CODE 77)
add_test(NAME jax.raising_run_is_error_naming_the_exception
  COMMAND ${CMAKE_SOURCE_DIR}/tests/jax/run.sh ${CMAKE_SOURCE_DIR}/tests/jax/check_jax_case.py
    raises ERROR --raising-run --reason "ValueError: planted: this loss cannot be traced"
    --out-dir ${JAX_OUT}/raising_run)
set_tests_properties(jax.raising_run_is_error_naming_the_exception PROPERTIES LABELS "xla;jax"
  ENVIRONMENT "${JAX_ENV}" SKIP_RETURN_CODE 77)
