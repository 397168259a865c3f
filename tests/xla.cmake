# torch_xla on XLA:CPU (label `xla`): python/examples/xla_checkpoints.py's
# checkpoints through verify(device="xla") in the XLA environment
# (.venv-xla, docs/stack.md), each judged by the C judge from its gradients
# and XLA's own evidence (docs/xla.md). Without .venv-xla each test is
# Skipped with the reason (tests/xla/run.sh exits 77).
set(XLA_OUT ${CMAKE_BINARY_DIR}/xla)
set(XLA_ENV "CKPT_VERIFY=$<TARGET_FILE:ckpt-verify>")
# name | case | run | verdict | reason regex | keep barriers (1) or XLA:CPU's default pipeline (0)
#   [| verify()'s noise_runs, when not its default 4: fewer re-runs of a run that differs
#    [| --as-lambdas: the case given as lambdas, as a script written in one go gives it]]
set(XLA_TESTS
  "torch_xla_checkpoint_passes_when_xla_keeps_its_barriers|xla_cse|torch_xla_checkpoint|PASS|recompute kept by XLA in 4 region[(]s[)]: [0-9]+ op[(]s[)] marked as recompute after optimization, 84 traced.* temp buffers 0[.][0-9]+x baseline|1"
  "default_pipeline_expands_torch_xla_barriers_and_hoists_the_recompute|xla_cse|torch_xla_checkpoint|MEMFAIL|recompute survives XLA's optimization [(][0-9]+ op[(]s[)] marked as recompute after it, 84 traced[)], but nothing is saved.*scheduled the recompute of 3 region.*4 before optimization, 0 after|0"
  "upstream_reentrant_recompute_is_merged_by_cse|xla_cse|upstream_reentrant|MEMFAIL|recompute of 4 of 4 region[(]s[)] was merged into the forward by XLA [(]CSE[)]: 84 recompute op[(]s[)] traced, 0 left.*1[.]00x baseline|1"
  "upstream_nonreentrant_recompute_is_merged_by_cse|xla_cse|upstream_nonreentrant|MEMFAIL|recompute of 4 of 4 region[(]s[)] was merged into the forward by XLA [(]CSE[)]: 84 recompute op[(]s[)] traced, 0 left.*1[.]00x baseline|1"
  "merged_recompute_names_torch_xla_graph_hash_collision|xla_cse|upstream_nonreentrant|MEMFAIL|graph hash of this step equals the plain baseline's|0"
  "barrier_context_on_recompute_inputs_only_is_hoisted_by_the_scheduler|xla_cse|upstream_barrier_context|MEMFAIL|recompute survives XLA's optimization [(][0-9]+ op[(]s[)] marked as recompute after it, 84 traced[)].*scheduled the recompute of 3 region.*barriers beyond the recompute inputs: 4 held|1"
  "reference_xla_style_checkpoint_passes|xla_cse|xla_style|PASS|recompute kept by XLA in 4 region[(]s[)]: [0-9]+ op[(]s[)] marked as recompute after optimization, 84 traced.*0[.][0-9]+x baseline|1"
  "planted_no_barrier_is_merged_by_cse|xla_cse|planted_no_barrier|MEMFAIL|recompute of 4 of 4 region[(]s[)] was merged into the forward by XLA [(]CSE[)]|1"
  "planted_barrier_everything_passes_with_its_extra_barriers_reported|xla_cse|planted_barrier_everything|PASS|finding: opt-barriers beyond the recompute inputs: 52 held value[(]s[)] no recompute op reads.*[0-9]+ bytes kept live|1"
  "dropout_planted_no_xla_rng_stash_fails_in_step_1|xla_dropout|planted_no_xla_rng_stash|FAIL|^(differs in [0-9]+ of [0-9]+ attempts[^:]*: )?steps/1/grads/|1"
  "dropout_torch_xla_checkpoint_moves_the_next_steps_rng|xla_dropout|torch_xla_checkpoint|FAIL|^(differs in [0-9]+ of [0-9]+ attempts[^:]*: )?steps/2/loss|1"
  "autocast_reference_replays_bf16_autocast|xla_autocast|xla_style|PASS|bitwise identical|1"
  "autocast_planted_no_replay_fails|xla_autocast|planted_no_autocast_replay|FAIL|^(differs in [0-9]+ of [0-9]+ attempts[^:]*: )?steps/1/grads/|1"
  "autocast_torch_xla_checkpoint_replays_bf16_autocast|xla_autocast|torch_xla_checkpoint|PASS|bitwise identical|1"
  "norm_tanh_torch_xla_checkpoint_differs_by_xlas_rounding_only|xla_norm_tanh|torch_xla_checkpoint|NOISE|^XLA's rounding, not the checkpoint: the same HLO compiled without XLA's fusion [(]torch_xla_checkpoint_graphs[)] is bitwise identical to baseline_graphs_baseline_0, and every tensor lies within 16x max[(]rho, 1[)] of baseline_0 in all 2 attempts.*max scaled ULP [0-9.]+|1|1"
  "norm_tanh_torch_xla_checkpoint_given_as_lambdas_is_noise_by_its_twin|xla_norm_tanh|torch_xla_checkpoint|NOISE|^XLA's rounding, not the checkpoint: the same HLO compiled without XLA's fusion [(]torch_xla_checkpoint_graphs[)] is bitwise identical to baseline_graphs_baseline_0|1|1|--as-lambdas"
  "dropout_without_rng_replay_is_not_xlas_rounding|xla_dropout|planted_no_rng_replay|FAIL|^(differs in [0-9]+ of [0-9]+ attempts[^:]*: )?steps/1/grads/.*not XLA's rounding: the same HLO compiled without XLA's fusion [(]planted_no_rng_replay_graphs[)] differs from baseline_graphs_baseline_0 too [(]FAIL[)]|1|0"
)
foreach(spec ${XLA_TESTS})
  string(REPLACE "|" ";" parts "${spec}")
  list(GET parts 0 name)
  list(GET parts 1 case)
  list(GET parts 2 run)
  list(GET parts 3 verdict)
  list(GET parts 4 reason)
  list(GET parts 5 keep)
  set(extra "")
  if(keep)
    set(extra --keep-barriers)
  endif()
  list(LENGTH parts n_parts)
  if(n_parts GREATER 6)
    list(GET parts 6 noise_runs)
    list(APPEND extra --noise-runs ${noise_runs})
  endif()
  # A case given another way (as lambdas) repeats a run the figure of
  # bytes per run already draws: its report goes one folder deeper, out of
  # the figure's reports (tests/xla/bytes_plot.sh reads XLA_OUT/*/*.h5).
  set(out_dir ${XLA_OUT}/${name})
  if(n_parts GREATER 7)
    list(GET parts 7 how)
    list(APPEND extra ${how})
    set(out_dir ${XLA_OUT}/given_otherwise/${name})
  endif()
  add_test(NAME xla.${name}
    COMMAND ${CMAKE_SOURCE_DIR}/tests/xla/run.sh ${CMAKE_SOURCE_DIR}/tests/xla/check_xla_case.py
      ${case} ${run} ${verdict} --reason "${reason}" ${extra} --out-dir ${out_dir})
  set_tests_properties(xla.${name} PROPERTIES LABELS "xla" ENVIRONMENT "${XLA_ENV}" SKIP_RETURN_CODE 77
    FIXTURES_SETUP xla_reports)
endforeach()
# The figure of bytes per run, measured by XLA and predicted from eager torch
# (docs/xla.md), drawn from the reports the tests above (and tests/jax.cmake's)
# wrote: they are its fixture, so selecting it runs them first.
add_test(NAME xla.bytes_plot_has_measured_and_predicted_bytes_per_run
  COMMAND ${CMAKE_SOURCE_DIR}/tests/xla/bytes_plot.sh ${XLA_OUT}/plot ${XLA_OUT} ${CMAKE_BINARY_DIR}/jax)
set_tests_properties(xla.bytes_plot_has_measured_and_predicted_bytes_per_run PROPERTIES LABELS "xla"
  ENVIRONMENT "${XLA_ENV}" SKIP_RETURN_CODE 77 FIXTURES_REQUIRED xla_reports)
