# The Python library (python/ckpt_verify, label `python`): the examples in
# python/examples through verify() and the real judge on the CPU, with the
# verdict each must get; bad inputs raise their own exception and make the
# CLI exit 2 with nothing written. The same examples on CUDA run from
# scripts/gpu-build.sh (tests/python/check_example.py --device cuda).
set(PY_OUT ${CMAKE_BINARY_DIR}/python)
file(MAKE_DIRECTORY ${PY_OUT}/cli)
set(PY_ENV "CKPT_VERIFY=$<TARGET_FILE:ckpt-verify>" "CKPT_ATEN_LIB=$<TARGET_FILE:ckpt_aten>")

foreach(example transformer_torch_checkpoint planted_no_rng_stash hook_checkpoint)
  add_test(NAME python.example.${example}
    COMMAND ${CKPT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/python/check_example.py ${example} --out-dir ${PY_OUT}/examples)
  set_tests_properties(python.example.${example} PROPERTIES LABELS "python" ENVIRONMENT "${PY_ENV}")
  # verify(device="cuda"): registered everywhere, Skipped with the reason
  # where the torch sees no CUDA device (77), run on a GPU machine.
  add_test(NAME python.example.${example}_cuda
    COMMAND ${CKPT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/python/check_example.py ${example} --device cuda
      --out-dir ${PY_OUT}/examples_cuda)
  set_tests_properties(python.example.${example}_cuda PROPERTIES LABELS "python;gpu" ENVIRONMENT "${PY_ENV}"
    SKIP_RETURN_CODE 77)
endforeach()

# `ckpt-verify plot` on a Python-verified report draws its time and memory
# beside the determinism plot, for the user's own runs.
set_tests_properties(python.example.transformer_torch_checkpoint PROPERTIES FIXTURES_SETUP py_report)
ckpt_add_test_needing(python.plot_draws_time_and_memory TOOLS gnuplot
  COMMAND ${CKPT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/check_plot_pages.py $<TARGET_FILE:ckpt-verify> python
    ${PY_OUT}/examples/transformer_torch_checkpoint_cpu.judge ${PY_OUT}/plot_py)
set_tests_properties(python.plot_draws_time_and_memory PROPERTIES FIXTURES_REQUIRED py_report LABELS "python;plot")
# verify(out=...) calls the C judge, which writes the page beside its summary.
add_test(NAME python.verify_writes_the_judges_report_html
  COMMAND ${CKPT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/python/check_verify_page.py
    ${PY_OUT}/examples/transformer_torch_checkpoint_cpu.h5 ${PY_OUT}/examples/transformer_torch_checkpoint_cpu.judge)
set_tests_properties(python.verify_writes_the_judges_report_html PROPERTIES FIXTURES_REQUIRED py_report
  LABELS "python;html")

foreach(pair "nonscalar_loss NonScalarLoss" "model_not_reproducible ModelNotReproducible"
             "run_name_clash BadRunName" "buffer_name_collision NameCollision")
  separate_arguments(pair)
  list(GET pair 0 bad)
  list(GET pair 1 error)
  add_test(NAME python.bad_input.${bad}
    COMMAND ${CKPT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/python/check_bad_input.py ${bad} ${error} ${PY_OUT}/bad/${bad})
  set_tests_properties(python.bad_input.${bad} PROPERTIES LABELS "python" ENVIRONMENT "${PY_ENV}")
endforeach()

add_test(NAME python.assert_verified_raises_on_an_undeclared_fail
  COMMAND ${CKPT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/python/check_assert_verified.py ${PY_OUT}/assert_verified)
# The CLI on a script: the table, the planted bug FAIL as declared, exit 0.
add_test(NAME python.cli_runs_a_script
  COMMAND ${CMAKE_SOURCE_DIR}/tests/expect.sh 0 "hook_checkpoint_counter_reset +FAIL +yes"
  "hook_checkpoint +PASS +yes" "all verdicts as expected" "memory: counting CPU allocator"
  -- ${CKPT_PYTHON} -m ckpt_verify --out ${PY_OUT}/cli/hook_checkpoint.h5
  ${CMAKE_SOURCE_DIR}/python/examples/hook_checkpoint.py)
# The script's own arguments reach it: the words after SCRIPT are its
# sys.argv[1:] (here they name the case and plant the bug it must catch).
add_test(NAME python.cli_passes_the_script_its_arguments
  COMMAND ${CMAKE_SOURCE_DIR}/tests/expect.sh 1 "case argv_w6 " "planted +FAIL +NO" "argv: .*'--width', '6', '--plant'"
  -- ${CKPT_PYTHON} -m ckpt_verify --out ${PY_OUT}/cli/argv.h5
  ${CMAKE_SOURCE_DIR}/tests/python/argv_script.py --width 6 --plant)
set_tests_properties(python.assert_verified_raises_on_an_undeclared_fail python.cli_runs_a_script
  python.cli_passes_the_script_its_arguments PROPERTIES
  LABELS "python" ENVIRONMENT "${PY_ENV};PYTHONPATH=${CMAKE_SOURCE_DIR}/python")
# README's first example is python/examples/quickstart.py and runs as written.
add_test(NAME python.readme_quickstart_passes
  COMMAND ${CKPT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/python/check_readme_quickstart.py ${PY_OUT}/quickstart)
set_tests_properties(python.readme_quickstart_passes PROPERTIES LABELS "python;docs" ENVIRONMENT "${PY_ENV}")
# docs/external.md's walkthrough runs as written.
add_test(NAME python.external_md_walkthrough_passes
  COMMAND ${CKPT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/python/check_walkthrough.py ${PY_OUT}/walkthrough)
set_tests_properties(python.external_md_walkthrough_passes PROPERTIES LABELS "python" ENVIRONMENT "${PY_ENV}")
add_test(NAME python.judge_failure_is_a_judge_error_and_keeps_the_report
  COMMAND ${CKPT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/python/check_judge_errors.py ${PY_OUT}/judge_errors)
set_tests_properties(python.judge_failure_is_a_judge_error_and_keeps_the_report PROPERTIES
  LABELS "python" ENVIRONMENT "${PY_ENV}")
add_test(NAME python.raising_run_is_error_raising_baseline_writes_nothing
  COMMAND ${CKPT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/python/check_run_error.py ${PY_OUT}/run_error)
set_tests_properties(python.raising_run_is_error_raising_baseline_writes_nothing PROPERTIES
  LABELS "python" ENVIRONMENT "${PY_ENV}")

# Every Python file of the project is ruff-clean (ruff.toml; ruff is pinned
# in env/requirements.txt). A python without ruff (a GPU machine's own) is
# Skipped, saying so.
add_test(NAME lint.ruff
  COMMAND bash -c "${CKPT_PYTHON} -m ruff --version >/dev/null 2>&1 || { echo 'skipped: ${CKPT_PYTHON} has no ruff'; exit 77; }; exec ${CKPT_PYTHON} -m ruff check --no-cache python scripts tests realworld"
  WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(lint.ruff PROPERTIES LABELS "lint;python" SKIP_RETURN_CODE 77)

# pytest specifications of the Python API (tests/python/test_*.py): the
# Report's truthiness, mapping and repr; up-front refusals; temporary reports;
# the CLI's exit statuses (test_cli_contract), the writer's room on a full or
# read-only disk (test_report_room), runs isolated on their own batches
# (test_run_isolation) and every generator seeded (test_reproducible_steps).
# tests/python/compile is the `compile` label's (tests/compile.cmake).
add_test(NAME python.pytest
  COMMAND ${CKPT_PYTHON} -m pytest -q -p no:cacheprovider --ignore=${CMAKE_SOURCE_DIR}/tests/python/adversarial
    --ignore=${CMAKE_SOURCE_DIR}/tests/python/compile ${CMAKE_SOURCE_DIR}/tests/python
  WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(python.pytest PROPERTIES LABELS "python" ENVIRONMENT "${PY_ENV}")

# The adversarial suite (issue 42, tests/python/adversarial): one module per
# bug class a user's checkpoint may hide (a checkpoint in the baseline that
# evades the probe, a lost input gradient, module state outside buffers),
# each its own test so that CTest runs them side by side.
foreach(bug ckpt_from_second_forward ckpt_for_long_sequences recompute_on_worker_thread fused_dropout_redraw
            ckpt_off_under_dispatch_mode probe_findings_alone input_grads module_state)
  add_test(NAME python.adversarial.${bug}
    COMMAND ${CKPT_PYTHON} -m pytest -q -p no:cacheprovider ${CMAKE_SOURCE_DIR}/tests/python/adversarial/test_${bug}.py
    WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(python.adversarial.${bug} PROPERTIES LABELS "python" ENVIRONMENT "${PY_ENV}")
endforeach()

# The scale benchmark (issue 30, docs/scale.md) at its smallest size: the
# figures come from scripts/bench_scale.py; here --check holds the planted
# bug (no RNG replay in the recompute) to FAIL with its first divergence and
# torch's checkpoints to pass, through verify() and the real judge.
add_test(NAME bench.scale_tiny
  COMMAND ${CKPT_PYTHON} ${CMAKE_SOURCE_DIR}/scripts/bench_scale.py --sizes tiny --out ${PY_OUT}/scale --check)
set_tests_properties(bench.scale_tiny PROPERTIES LABELS "bench" ENVIRONMENT "${PY_ENV}" TIMEOUT 900)
# The harness's side of the same figures (cases/bench/scale.ini; the
# real-width case is scale_mlp8_h2048): the quick case, verdicts held.
add_test(NAME bench.scale_harness_quick
  COMMAND ${CKPT_PYTHON} ${CMAKE_SOURCE_DIR}/scripts/bench_scale_harness.py --cv $<TARGET_FILE:ckpt-verify>
          --case scale_mlp8_h256 --out ${PY_OUT}/scale_harness --check)
set_tests_properties(bench.scale_harness_quick PROPERTIES LABELS "bench" ENVIRONMENT "${PY_ENV}" TIMEOUT 900)
