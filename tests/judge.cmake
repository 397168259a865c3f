# `ckpt-verify judge`: verdicts from files alone. The crafted files are
# written with h5py by tests/make_judge_files.py, as another framework
# would; the agreement test judges the harness's own reports again.
set(CV $<TARGET_FILE:ckpt-verify>)
set(EXPECT ${CMAKE_SOURCE_DIR}/tests/expect.sh)
set(EXPECT_ERROR ${CMAKE_SOURCE_DIR}/tests/expect_error.sh)
set(JUDGE_OUT ${CMAKE_BINARY_DIR}/judge)

add_test(NAME judge.crafted_files
  COMMAND bash -c "rm -rf ${JUDGE_OUT}/files && ${CKPT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/make_judge_files.py ${JUDGE_OUT}/files")
set_tests_properties(judge.crafted_files PROPERTIES FIXTURES_SETUP judge_files)

function(judge_test name)
  add_test(NAME judge.${name} COMMAND ${ARGN})
  set_tests_properties(judge.${name} PROPERTIES FIXTURES_REQUIRED judge_files LABELS "judge")
endfunction()

# Sign flips of near-zero bias elements are ~2^31 ULP element-wise: a raw
# ULP floor would call everything NOISE. Per tensor at its scale the noisy
# run is NOISE and the run with one weight element moved by 1e-4 is FAIL.
judge_test(sign_flip_noise_is_noise_and_a_moved_weight_fails
  ${EXPECT} 0 "noisy +NOISE +yes" "every tensor within 16x its own spread over 3 baselines"
  "moved +FAIL +yes" "steps/2/grads/l0.weight lies outside its noise envelope"
  "first divergence|steps/2/grads/l0.weight \\[17\\]"
  -- ${CV} judge ${JUDGE_OUT}/files/noise.h5)
judge_test(undeclared_fail_exits_1
  ${EXPECT} 1 "moved +FAIL +NO" "UNEXPECTED verdicts" -- ${CV} judge ${JUDGE_OUT}/files/undeclared.h5)
judge_test(bitwise_baselines_demand_bitwise
  ${EXPECT} 0 "same +PASS +yes" "one_ulp +FAIL +yes" "its 2 baselines agree bitwise, one_ulp differs"
  -- ${CV} judge ${JUDGE_OUT}/files/bitwise.h5)
# Every attempt (the run and its re-runs) must lie inside the envelope: a
# flaky checkpoint wrong in one attempt of two FAILs, though its re-run
# reproduces baseline_0; kernel noise within in every attempt stays NOISE.
judge_test(a_flaky_run_fails_though_its_rerun_reproduces_baseline_0
  ${EXPECT} 0 "flaky +FAIL +yes"
  "differs in 1 of 2 attempts \\(the run and 1 re-run\\(s\\); the worst, flaky\\): steps/2/grads/l0\\.weight:"
  "its 2 baselines agree bitwise, flaky differs by 2\\.9e\\+06 scaled ULP"
  -- ${CV} judge ${JUDGE_OUT}/files/flaky.h5)
judge_test(noise_needs_every_attempt_within
  ${EXPECT} 0 "noisy +NOISE +yes" "over 3 baselines in all 2 attempts" "moved_once +FAIL +yes"
  "differs in 1 of 2 attempts \\(the run and 1 re-run\\(s\\); the worst, moved_once\\)"
  -- ${CV} judge ${JUDGE_OUT}/files/attempts.h5)
judge_test(recorded_error_outcome_is_error
  ${EXPECT} 0 "crashed +ERROR +yes" "CUDA out of memory in recompute" -- ${CV} judge ${JUDGE_OUT}/files/outcome.h5)
judge_test(no_baseline_is_input_error
  ${EXPECT_ERROR} 2 "no_baseline\\.h5: /runs/baseline_0: run missing" -- ${CV} judge ${JUDGE_OUT}/files/no_baseline.h5)
judge_test(run_without_loss_is_input_error
  ${EXPECT_ERROR} 2 "no_loss\\.h5: /runs/mine/steps/1.*loss" -- ${CV} judge ${JUDGE_OUT}/files/no_loss.h5)
judge_test(bad_case_value_is_input_error
  ${EXPECT_ERROR} 2 "bad_case\\.h5: /case: attribute tolerance: bad value 'a lot'" -- ${CV} judge ${JUDGE_OUT}/files/bad_case.h5)
judge_test(not_hdf5_is_input_error
  ${EXPECT_ERROR} 2 "make_judge_files\\.py" -- ${CV} judge ${CMAKE_SOURCE_DIR}/tests/make_judge_files.py)
add_test(NAME judge.out_gets_summary_and_junit COMMAND bash -c "set -e; rm -rf ${JUDGE_OUT}/out; ${CV} judge --out ${JUDGE_OUT}/out ${JUDGE_OUT}/files/noise.h5 ${JUDGE_OUT}/files/bitwise.h5 >/dev/null; ${CKPT_PYTHON} -c \"import json,sys; r=json.load(open('${JUDGE_OUT}/out/summary.json'))['records']; v={(x['case'],x['impl']):x['verdict'] for x in r}; sys.exit(0 if v=={('crafted_noise','noisy'):'NOISE',('crafted_noise','moved'):'FAIL',('crafted_bitwise','same'):'PASS',('crafted_bitwise','one_ulp'):'FAIL'} else 'verdicts: %s' % v)\"; test -s ${JUDGE_OUT}/out/junit.xml")
add_test(NAME judge.bad_file_writes_nothing COMMAND bash -c "rm -rf ${JUDGE_OUT}/none; ${CV} judge --out ${JUDGE_OUT}/none ${JUDGE_OUT}/files/noise.h5 ${JUDGE_OUT}/files/no_loss.h5; rc=$?; test $rc -eq 2 && test ! -e ${JUDGE_OUT}/none")
# (Commands with ';' go straight to add_test: a function's ARGN would split them.)
set_tests_properties(judge.out_gets_summary_and_junit judge.bad_file_writes_nothing PROPERTIES
  FIXTURES_REQUIRED judge_files LABELS "judge")

# The harness's verdicts are judge's: the same runs judged again from the
# files give the same verdicts, reasons and first divergences (planted bugs,
# atomic-kernel noise, re-runs and MEMFAIL included; the hook count and the
# step-start bytes: hook_fires_twice, leaked_recompute_frame).
add_test(NAME judge.agrees_with_the_runner
  COMMAND bash -c "set -e; rm -rf ${JUDGE_OUT}/run ${JUDGE_OUT}/again; ${CV} --case mutation_mlp --case mutation_gpt_memory --case bias_gelu_atomic_bs8 --case mlp_no_input_grad --case backward_reentrant_mlp_loss --out ${JUDGE_OUT}/run >/dev/null; ${CV} judge --out ${JUDGE_OUT}/again ${JUDGE_OUT}/run/*.h5 >/dev/null; ${CKPT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/check_summaries_agree.py ${JUDGE_OUT}/run/summary.json ${JUDGE_OUT}/again/summary.json")
set_tests_properties(judge.agrees_with_the_runner PROPERTIES LABELS "judge" FIXTURES_SETUP judge_runner_reports)
# The torch-free judge (ckpt-verify-judge, what pip installs) gives the same
# verdicts, reasons and first divergences on the same reports: planted bugs,
# NOT_OBSERVABLE and references included, from what the reports record.
add_test(NAME judge.torch_free_judge_agrees_with_the_runner
  COMMAND bash -c "set -e; rm -rf ${JUDGE_OUT}/torch_free; $<TARGET_FILE:ckpt-verify-judge> judge --out ${JUDGE_OUT}/torch_free ${JUDGE_OUT}/run/*.h5 >/dev/null; ${CKPT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/check_summaries_agree.py ${JUDGE_OUT}/run/summary.json ${JUDGE_OUT}/torch_free/summary.json --kinds PASS,FAIL,NOT_OBSERVABLE")
set_tests_properties(judge.torch_free_judge_agrees_with_the_runner PROPERTIES LABELS "judge"
  FIXTURES_REQUIRED judge_runner_reports)
# The judge side links no libtorch (nor anything of torch's).
add_test(NAME judge.torch_free_judge_links_no_torch
  COMMAND bash -c "libs=$(ldd $<TARGET_FILE:ckpt-verify-judge>) || exit 1; echo \"$libs\"; grep -q libhdf5 <<< \"$libs\" || exit 1; ! grep -Eq 'libtorch|libc10|libckpt_aten' <<< \"$libs\"")
set_tests_properties(judge.torch_free_judge_links_no_torch PROPERTIES LABELS "judge")

# One verdict, one distance: the table's column, summary.json, JUnit, the
# determinism plot and the reason show the same max scaled ULP; the raw
# element-wise max ULP appears only labelled raw (the noisy run's sign
# flips are ~2^31 raw ULP and a few scaled ULP).
ckpt_add_test_needing(judge.one_distance_everywhere TOOLS gnuplot
  COMMAND bash -c "rm -rf ${JUDGE_OUT}/one_distance && ${CKPT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/check_one_distance.py ${CV} ${JUDGE_OUT}/one_distance ${JUDGE_OUT}/files/noise.h5 ${JUDGE_OUT}/files/bitwise.h5 ${JUDGE_OUT}/files/outcome.h5 ${JUDGE_OUT}/files/dropped_grad.h5")
set_tests_properties(judge.one_distance_everywhere PROPERTIES FIXTURES_REQUIRED judge_files LABELS "judge")

# `diff` prints the distance the table prints: per tensor the max scaled
# ULP (raw beside it, labelled), whose largest is the table's figure for
# that run (a noisy run and a run moved beyond its noise).
add_test(NAME judge.diff_shows_the_tables_scaled_ulp
  COMMAND bash -c "rm -rf ${JUDGE_OUT}/diff_distance && ${CKPT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/check_diff_distance.py ${CV} ${JUDGE_OUT}/diff_distance ${JUDGE_OUT}/files/noise.h5 noisy moved")
set_tests_properties(judge.diff_shows_the_tables_scaled_ulp PROPERTIES FIXTURES_REQUIRED judge_files LABELS "judge")

# ---- a report that cannot pass half-done ------------------------------------
# Every run /case names (impls, expect, python/ckpt_verify's `runs`) must be
# in the file and whole, or it is an ERROR naming it, never expected: the
# table, summary.json and JUnit say so and the exit code follows.
judge_test(run_named_by_impls_but_absent_is_error
  ${EXPECT} 1 "lost +ERROR +NO" "run lost is named by /case but absent from .*/absent\\.h5" "same +PASS +yes"
  "UNEXPECTED" -- ${CV} judge ${JUDGE_OUT}/files/absent.h5)
judge_test(run_named_by_expect_but_absent_is_error
  ${EXPECT} 1 "gone +ERROR +NO" "run gone is named by /case but absent from .*/expect_absent\\.h5"
  -- ${CV} judge ${JUDGE_OUT}/files/expect_absent.h5)
judge_test(run_named_by_python_runs_attr_but_absent_is_error
  ${EXPECT} 1 "unfinished +ERROR +NO" "run unfinished is named by /case but absent from .*/runs_absent\\.h5"
  -- ${CV} judge ${JUDGE_OUT}/files/runs_absent.h5)
judge_test(run_cut_mid_step_is_incomplete_error
  ${EXPECT} 1 "cut +ERROR +NO +- .* steps/2/grads/l0\\.weight missing"
  "run cut is named by /case but incomplete in .*/cut\\.h5: missing steps/2/grads/l0\\.weight \\(2 of baseline_0's 7 tensors are missing\\)"
  -- ${CV} judge ${JUDGE_OUT}/files/cut.h5)
# A run that holds every step and final parameter but never a gradient did
# not produce it (docs/realworld.md: frozen inputs under a reentrant
# checkpoint): FAIL, judged, not an incomplete report.
judge_test(run_without_a_gradient_in_every_step_still_fails
  ${EXPECT} 0 "dropped +FAIL +yes" "steps/1/grads/l0\\.bias is recorded by baseline_0 but not by dropped"
  -- ${CV} judge ${JUDGE_OUT}/files/dropped_grad.h5)
judge_test(baseline_cut_short_is_input_error
  ${EXPECT_ERROR} 2 "baseline_cut\\.h5: /runs/baseline_1: incomplete: steps/2/loss is missing"
  -- ${CV} judge ${JUDGE_OUT}/files/baseline_cut.h5)
# Completeness against /case (issue 49): every run, baselines included,
# holds the steps /case promises and the final value of every parameter
# /params_init names, or it (or every run judged against the short
# baseline) is an ERROR naming what it lacks, never PASS.
judge_test(every_run_short_of_case_steps_is_error
  ${EXPECT} 1 "same +ERROR +NO"
  "run same holds 1 of the 2 steps /case promises \\(its steps\\) in .*/steps_short\\.h5: steps/2/loss missing"
  "UNEXPECTED" -- ${CV} judge ${JUDGE_OUT}/files/steps_short.h5)
judge_test(two_of_five_case_steps_is_error
  ${EXPECT} 1 "same +ERROR +NO" "run same holds 2 of the 5 steps /case promises .*: steps/3/loss missing"
  -- ${CV} judge ${JUDGE_OUT}/files/steps_five.h5)
judge_test(run_judged_against_a_baseline_short_of_case_steps_is_error
  ${EXPECT} 1 "whole +ERROR +NO"
  "run whole is judged against baseline_0, which holds 1 of the 2 steps /case promises .*: steps/2/loss missing"
  -- ${CV} judge ${JUDGE_OUT}/files/baseline_short.h5)
judge_test(every_run_short_of_a_params_init_parameter_is_error
  ${EXPECT} 1 "same +ERROR +NO"
  "run same lacks the final value of a parameter /params_init names \\(2 of them\\) in .*/params_short\\.h5: final_params/l0\\.bias missing"
  -- ${CV} judge ${JUDGE_OUT}/files/params_short.h5)
judge_test(error_outcome_without_message_still_has_a_reason
  ${EXPECT} 1 "crashed +ERROR +NO" "the run ended in an error \\(outcome=error\\) and recorded no message"
  -- ${CV} judge ${JUDGE_OUT}/files/error_no_message.h5)
# Only baselines: nothing judged is an ERROR record with its reason, in the
# table, summary.json (no empty reason) and JUnit, and exit 1, never 0.
add_test(NAME judge.baselines_only_is_error_everywhere
  COMMAND bash -c "rm -rf ${JUDGE_OUT}/only; ${EXPECT} 1 'ERROR +no run to judge: .*baselines_only\\.h5 holds only baselines' -- ${CV} judge --out ${JUDGE_OUT}/only ${JUDGE_OUT}/files/baselines_only.h5 || exit 1; ${CKPT_PYTHON} -c \"import json,sys; r=json.load(open('${JUDGE_OUT}/only/summary.json'))['records']; ok=len(r)==1 and r[0]['verdict']=='ERROR' and 'no run to judge' in r[0]['reason']; sys.exit(0 if ok else 'records: %s' % r)\" && grep -q 'errors=\"1\"' ${JUDGE_OUT}/only/junit.xml")
# Beside a complete report, a bad one does not hide behind exit 0.
add_test(NAME judge.incomplete_file_beside_a_complete_one_exits_1
  COMMAND ${EXPECT} 1 "moved +FAIL +yes" "cut +ERROR +NO" "2 file\\(s\\) judged; UNEXPECTED"
  -- ${CV} judge ${JUDGE_OUT}/files/noise.h5 ${JUDGE_OUT}/files/cut.h5)
set_tests_properties(judge.baselines_only_is_error_everywhere judge.incomplete_file_beside_a_complete_one_exits_1
  PROPERTIES FIXTURES_REQUIRED judge_files LABELS "judge")
