# Robustness: bad case files, bad and damaged HDF5 input to diff, NaN/Inf in
# gradients, cases too large for memory, unusable output directories, a run
# killed mid-write, and the fuzzers' regression inputs. Bad input must end
# in one line on stderr and exit 2 (tests/expect_error.sh checks both).
set(CV $<TARGET_FILE:ckpt-verify>)
set(EXPECT ${CMAKE_SOURCE_DIR}/tests/expect.sh)
set(EXPECT_ERROR ${CMAKE_SOURCE_DIR}/tests/expect_error.sh)
set(WRITES_NOTHING ${CMAKE_SOURCE_DIR}/tests/writes_nothing.sh)
set(BAD_CASES ${CMAKE_SOURCE_DIR}/tests/data/cases)
set(ROBUST_OUT ${CMAKE_BINARY_DIR}/it/robust)

# ---- case files: each bad file is one line naming file:line, exit 2 -------
function(bad_case_file name regex)
  add_test(NAME robust.cases.${name}
    COMMAND ${EXPECT_ERROR} 2 "^ckpt-verify: .*${name}\\.ini:${regex}" -- ${CV} --cases ${BAD_CASES}/${name}.ini --list)
  set_tests_properties(robust.cases.${name} PROPERTIES LABELS "robust")
endfunction()
bad_case_file(syntax_error "3: syntax error: 'hidden 8' is not 'key = value'")
bad_case_file(unclosed_section "1: syntax error: section header '\\[case:a' has no closing")
bad_case_file(unknown_section "4: unknown section '\\[cases:b\\]'")
bad_case_file(unknown_key "3: unknown key 'hiden' in \\[case:a\\] \\(did you mean 'hidden'\\?\\)")
bad_case_file(out_of_range "3: bad value '0' for 'batch' in \\[case:a\\]: expected an integer 1\\.\\.65536")
bad_case_file(mistyped "3: bad value 'high' for 'dropout'")
bad_case_file(mistyped_int "2: bad value '2\\.5' for 'steps'")
bad_case_file(repeated_key "4: key 'hidden' repeated in \\[case:a\\] \\(first set at line 3\\)")
bad_case_file(sweep_empty "3: 'axis\\.batch' in \\[sweep:s\\] is empty: a sweep must expand to at least one case")
bad_case_file(sweep_duplicate "4: duplicate case name 's_bs2' \\(first defined at .*sweep_duplicate\\.ini:1\\)")
bad_case_file(sweep_name_repeats "2: name pattern 's_bs\\{batch\\}' does not use axis 'fusion'")
# selective checkpointing's policy (harness/cases/policy.h)
bad_case_file(policy_unknown_op "3: bad value 'save:linear,softmax' for 'policy' in \\[case:a\\]: unknown op 'softmax' \\(ops: linear, ")
bad_case_file(policy_without_selective "4: case 'a': policy applies to selective checkpointing only, and none of its impls is selective")
bad_case_file(policy_op_not_in_model "5: case 'a': policy names layer_norm, which model mlp \\(fusion as set\\) does not run \\(its ops: linear, gelu_tanh, dropout\\)$")
bad_case_file(policy_attention_core_no_attention "5: case 'a': policy attention_core recomputes causal_attention, which model branchy does not have")
bad_case_file(selective_without_policy "3: case 'a': impl 'selective' needs a policy")
# Checkpoints nest at most CASE_MAX_NEST (8) deep; running such a case
# writes nothing.
bad_case_file(nest_too_deep "3: bad value '9' for 'nest' in \\[case:a\\]: expected an integer 1\\.\\.8 ")
add_test(NAME robust.cases.nest_too_deep_writes_nothing
  COMMAND bash -c "rm -rf ${ROBUST_OUT}/nest_too_deep && ${EXPECT_ERROR} 2 \"nest_too_deep\\.ini:3: bad value '9' for 'nest'\" -- ${CV} --cases ${BAD_CASES}/nest_too_deep.ini --case a --out ${ROBUST_OUT}/nest_too_deep && test ! -e ${ROBUST_OUT}/nest_too_deep")
set_tests_properties(robust.cases.nest_too_deep_writes_nothing PROPERTIES LABELS "robust")

add_test(NAME robust.cases.missing_file
  COMMAND ${EXPECT_ERROR} 2 "^ckpt-verify: .*no_such_file\\.ini: No such file or directory$"
  -- ${CV} --cases ${BAD_CASES}/no_such_file.ini --list)
add_test(NAME robust.cases.unknown_case_suggests_nearest
  COMMAND ${EXPECT} 2 "unknown case 'tiny_bs2' \\(did you mean: tiny_bs1" -- ${CV} --cases ${BAD_CASES}/good.ini --case tiny_bs2)
# An impl name is checked before anything runs: no output directory appears.
add_test(NAME robust.cases.unknown_impl_before_any_run
  COMMAND bash -c "rm -rf ${ROBUST_OUT}/unknown_impl && ${EXPECT_ERROR} 2 \"unknown_impl\\.ini:1: case a: unknown impl 'nonreentrnt'\" -- ${CV} --cases ${BAD_CASES}/unknown_impl.ini --case a --out ${ROBUST_OUT}/unknown_impl && test ! -e ${ROBUST_OUT}/unknown_impl")
# A reentrant checkpoint keeps no saved tensors: the value check is refused,
# before anything runs, like an unknown impl.
add_test(NAME robust.cases.values_check_with_reentrant_before_any_run
  COMMAND bash -c "rm -rf ${ROBUST_OUT}/values_reentrant && ${EXPECT_ERROR} 2 \"values_with_reentrant\\.ini:1: case a: impl reentrant is reentrant: it keeps no saved tensors to compare, so determinism_check = values\" -- ${CV} --cases ${BAD_CASES}/values_with_reentrant.ini --case a --out ${ROBUST_OUT}/values_reentrant && test ! -e ${ROBUST_OUT}/values_reentrant")
# PyTorch's reentrant checkpoint refuses grad() and backward(inputs=): a
# case that asks for them with one is refused before anything runs.
add_test(NAME robust.cases.backward_grad_with_reentrant_before_any_run
  COMMAND bash -c "rm -rf ${ROBUST_OUT}/grad_reentrant && ${EXPECT_ERROR} 2 \"backward_grad_with_reentrant\\.ini:1: case a: backward = grad: impl reentrant is reentrant, and reentrant checkpointing is not compatible with grad\\(\\) or backward\\(inputs=\\.\\.\\.\\)\" -- ${CV} --cases ${BAD_CASES}/backward_grad_with_reentrant.ini --case a --out ${ROBUST_OUT}/grad_reentrant && test ! -e ${ROBUST_OUT}/grad_reentrant")
bad_case_file(backward_unknown "3: bad value 'retain' for 'backward' in \\[case:a\\]: expected one of loss, grad, inputs, twice")
set_tests_properties(robust.cases.missing_file robust.cases.unknown_case_suggests_nearest
  robust.cases.unknown_impl_before_any_run robust.cases.values_check_with_reentrant_before_any_run
  robust.cases.backward_grad_with_reentrant_before_any_run
  PROPERTIES LABELS "robust")

# ---- diff: bad, damaged and mismatched HDF5 input ------------------------
# One good report (a tiny case) and copies of it with one thing wrong.
set(GOOD_H5 ${ROBUST_OUT}/good/tiny_bs1.h5)
set(BAD_H5 ${ROBUST_OUT}/bad_h5)
add_test(NAME robust.diff.make_inputs
  COMMAND bash -c "set -e; rm -rf ${ROBUST_OUT}/good ${BAD_H5}; ${CV} --cases ${BAD_CASES}/good.ini --case tiny_bs1 --out ${ROBUST_OUT}/good >/dev/null; ${CKPT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/make_bad_h5.py ${GOOD_H5} ${BAD_H5} /runs/baseline_0/steps/1/grads/l0.weight")
set_tests_properties(robust.diff.make_inputs PROPERTIES FIXTURES_SETUP bad_h5 LABELS "robust")

function(bad_diff name regex)
  add_test(NAME robust.diff.${name} COMMAND ${EXPECT_ERROR} 2 "^ckpt-verify: ${regex}" -- ${CV} diff ${GOOD_H5} ${ARGN})
  set_tests_properties(robust.diff.${name} PROPERTIES FIXTURES_REQUIRED bad_h5 LABELS "robust")
endfunction()
bad_diff(missing_file ".*/nope\\.h5: No such file or directory$" ${BAD_H5}/nope.h5)
bad_diff(directory ".*/bad_h5: is a directory, not an HDF5 file$" ${BAD_H5})
bad_diff(empty_file ".*/empty\\.h5: empty file, not an HDF5 file$" ${BAD_H5}/empty.h5)
bad_diff(not_hdf5 ".*/not_hdf5\\.h5: not an HDF5 file$" ${BAD_H5}/not_hdf5.h5)
bad_diff(truncated ".*/truncated\\.h5: truncated or damaged HDF5 file" ${BAD_H5}/truncated.h5)
bad_diff(schema_version ".*/schema2\\.h5: /: schema_version is 2, this harness reads 1$" ${BAD_H5}/schema2.h5)
bad_diff(schema_version_missing ".*/no_schema\\.h5: /: attribute schema_version missing" ${BAD_H5}/no_schema.h5)
bad_diff(runs_group_missing ".*/no_runs\\.h5: /runs: group missing$" ${BAD_H5}/no_runs.h5)
bad_diff(run_missing ".*/no_runs\\.h5: /runs/baseline_0: run missing$" ${BAD_H5}/no_runs.h5:baseline_0)
bad_diff(steps_missing ".*/no_steps\\.h5: /runs/baseline_0/steps: no step recorded$" ${BAD_H5}/no_steps.h5)
bad_diff(loss_missing ".*/no_loss\\.h5: /runs/baseline_0/steps/1/loss: dataset missing$" ${BAD_H5}/no_loss.h5)
bad_diff(dtype_attribute_lies ".*/dtype_attr_lies\\.h5: /runs/baseline_0/steps/1/grads/l0\\.weight: dtype attribute says bfloat16 but the dataset holds 4-byte float values$"
  ${BAD_H5}/dtype_attr_lies.h5)
# The two sides disagree on a tensor's shape or dtype: not the same model.
bad_diff(shape_mismatch ".*/shape\\.h5: /runs/baseline_0/steps/1/grads/l0\\.weight: float32 \\[63\\] here but float32 \\[8, 8\\] in .*/tiny_bs1\\.h5:/runs/baseline_0/steps/1/grads/l0\\.weight: not comparable$"
  ${BAD_H5}/shape.h5)
bad_diff(dtype_mismatch ".*/dtype\\.h5: /runs/baseline_0/steps/1/grads/l0\\.weight: float64 \\[8, 8\\] here but float32 \\[8, 8\\] in .*: not comparable$"
  ${BAD_H5}/dtype.h5)

# A soft link where a tensor should be is named as what it is, not read as a
# missing tensor ("only in A").
bad_diff(soft_link_is_named_not_missing ".*/soft_link\\.h5: /runs/baseline_0/steps/1/grads/l0\\.weight: a soft link \\(to /runs/baseline_1/steps/1/grads/l0\\.weight\\), not a dataset or group"
  ${BAD_H5}/soft_link.h5)
# Checksums are verified on read: a crc32 that is not the data's is a
# corrupt file, named with the dataset.
bad_diff(wrong_crc32_is_corrupt ".*/wrong_crc32\\.h5: /runs/baseline_0/steps/1/grads/l0\\.weight: checksum mismatch \\(stored crc32 [0-9]+, data [0-9]+\\): the file is corrupt$"
  ${BAD_H5}/wrong_crc32.h5)

# ---- judge: checksums, links and completeness of the harness's own report --
function(bad_judge name regex file)
  add_test(NAME robust.judge.${name} COMMAND ${EXPECT_ERROR} 2 "^ckpt-verify: ${regex}" -- ${CV} judge ${file})
  set_tests_properties(robust.judge.${name} PROPERTIES FIXTURES_REQUIRED bad_h5 LABELS "robust")
endfunction()
# Every run links to baseline_0's gradient, so no comparison reads it; it
# is still read once, and its flipped bit found.
bad_judge(corrupt_dataset_shared_by_hard_links_is_found
  ".*/corrupt_shared\\.h5: /runs/baseline_0/steps/1/grads/l0\\.weight: checksum mismatch \\(stored crc32 [0-9]+, data [0-9]+\\): the file is corrupt$"
  ${BAD_H5}/corrupt_shared.h5)
bad_judge(soft_link_is_named_not_missing ".*/soft_link\\.h5: /runs/baseline_0/steps/1/grads/l0\\.weight: a soft link"
  ${BAD_H5}/soft_link.h5)
add_test(NAME robust.judge.run_deleted_from_report_is_error
  COMMAND ${EXPECT} 1 "nonreentrant +ERROR +NO" "run nonreentrant is named by /case but absent from .*/run_deleted\\.h5"
  "reentrant +PASS +yes" -- ${CV} judge ${BAD_H5}/run_deleted.h5)
# diff of a file against itself: every pair is one HDF5 object, equal
# without comparing; each is still read once, for its checksum.
add_test(NAME robust.diff.file_against_itself_is_one_object
  COMMAND ${EXPECT} 0 "10 tensors compared: 0 differ, 0 missing on one side \\(10 of them one HDF5 object on both sides"
  "bitwise identical" -- ${CV} diff ${GOOD_H5} ${GOOD_H5})
add_test(NAME robust.diff.file_against_itself_still_checks_checksums
  COMMAND ${EXPECT_ERROR} 2 "corrupt_shared\\.h5: /runs/baseline_0/steps/1/grads/l0\\.weight: checksum mismatch"
  -- ${CV} diff ${BAD_H5}/corrupt_shared.h5 ${BAD_H5}/corrupt_shared.h5)
set_tests_properties(robust.judge.run_deleted_from_report_is_error robust.diff.file_against_itself_is_one_object
  robust.diff.file_against_itself_still_checks_checksums PROPERTIES FIXTURES_REQUIRED bad_h5 LABELS "robust")

# ---- NaN and Inf: compared by their bits, counted, never silently equal ----
add_test(NAME robust.diff.nan_payloads_differ
  COMMAND ${EXPECT} 1 "steps/1/grads/l0\\.weight +1 of 64 differ; first at \\[0, 0\\] \\(nan vs nan; bits 0x7fc00000 vs 0x7fc00001\\); max scaled ULP inf .*; raw max ULP inf;.* NaN 1/1, Inf 0/0$"
  "1 differ, 0 missing on one side; NaN 1/1, Inf 0/0 -> DIFFERENT"
  -- ${CV} diff ${BAD_H5}/nan_a.h5 ${BAD_H5}/nan_payload.h5)
add_test(NAME robust.diff.nan_same_bits_counted_but_equal
  COMMAND ${EXPECT} 0 "steps/1/grads/l0\\.weight +identical, including NaN 1/1, Inf 0/0 \\(bit patterns equal\\)"
  "0 differ, 0 missing on one side; NaN 1/1, Inf 0/0 -> bitwise identical"
  -- ${CV} diff ${BAD_H5}/nan_a.h5 ${BAD_H5}/nan_a_again.h5)
add_test(NAME robust.diff.nan_vs_number
  COMMAND ${EXPECT} 1 "first at \\[0, 0\\] \\([-0-9.e]+ vs nan; bits 0x[0-9a-f]{8} vs 0x7fc00000\\); max scaled ULP inf .*; raw max ULP inf;.* NaN 0/1" "DIFFERENT"
  -- ${CV} diff ${GOOD_H5} ${BAD_H5}/nan_a.h5)
set_tests_properties(robust.diff.nan_payloads_differ robust.diff.nan_same_bits_counted_but_equal robust.diff.nan_vs_number
  PROPERTIES FIXTURES_REQUIRED bad_h5 LABELS "robust")

# ---- resources --------------------------------------------------------------
# A case whose tensors cannot fit the memory limit is refused from its
# shapes before anything runs or is allocated: one line naming file:line,
# what it needs and the limit that applies, exit 2, nothing written.
add_test(NAME robust.memory.case_too_large_refused_before_any_run
  COMMAND ${WRITES_NOTHING} ${ROBUST_OUT}/too_large 2 "^ckpt-verify: .*memory\\.ini:4: case too_large needs at least 6\\.0 TiB .*, more than the .* memory limit \\(.*\\); nothing run$"
  -- ${CV} --cases ${BAD_CASES}/memory.ini --case after_too_large --case too_large --out ${ROBUST_OUT}/too_large)
add_test(NAME robust.memory.params_64g_refused_against_the_limit
  COMMAND ${CMAKE_COMMAND} -E env CKPT_MEMORY_LIMIT=16G
  ${WRITES_NOTHING} ${ROBUST_OUT}/params_64g 2 "^ckpt-verify: .*memory\\.ini:[0-9]+: case params_64g needs at least 64\\.0 GiB .*, more than the [0-9.]+ [MG]iB memory limit \\([^)]+\\); nothing run$"
  -- ${CV} --cases ${BAD_CASES}/memory.ini --case params_64g --out ${ROBUST_OUT}/params_64g)
add_test(NAME robust.memory.over_env_limit_refused_up_front
  COMMAND ${CMAKE_COMMAND} -E env CKPT_MEMORY_LIMIT=8M
  ${WRITES_NOTHING} ${ROBUST_OUT}/over_limit_8m 2 "^ckpt-verify: .*case over_limit needs at least 16\\.1 MiB .*8\\.0 MiB memory limit \\(CKPT_MEMORY_LIMIT\\)"
  -- ${CV} --cases ${BAD_CASES}/memory.ini --case over_limit --out ${ROBUST_OUT}/over_limit_8m)
# Past the prediction, an allocation over the limit while the case runs is
# an ERROR verdict naming it; the next case still runs; exit 1, not 3.
add_test(NAME robust.memory.limit_from_environment
  COMMAND ${CMAKE_COMMAND} -E env CKPT_MEMORY_LIMIT=20M
  ${EXPECT} 1 "ERROR +initialising l0\\.weight: .*tried to allocate 16777216 bytes \\([0-9]+ bytes live; limit 20971520 bytes, CKPT_MEMORY_LIMIT\\)"
  "nonreentrant +PASS +yes"
  -- ${CV} --cases ${BAD_CASES}/memory.ini --case over_limit --case after_too_large --out ${ROBUST_OUT}/over_limit)
add_test(NAME robust.memory.malformed_limit
  COMMAND ${CMAKE_COMMAND} -E env CKPT_MEMORY_LIMIT=lots
  ${EXPECT_ERROR} 2 "^ckpt-verify: CKPT_MEMORY_LIMIT='lots': not a byte count"
  -- ${CV} --cases ${BAD_CASES}/good.ini --case tiny_bs1 --out ${ROBUST_OUT}/malformed_limit)
set_tests_properties(robust.memory.case_too_large_refused_before_any_run robust.memory.params_64g_refused_against_the_limit
  robust.memory.over_env_limit_refused_up_front robust.memory.limit_from_environment
  robust.memory.malformed_limit PROPERTIES LABELS "robust")

# An output directory that cannot be made is an error before any run: under
# a regular file, or in /proc (refused even to root, which CI runs as).
add_test(NAME robust.out.under_a_regular_file
  COMMAND bash -c "mkdir -p ${ROBUST_OUT} && : > ${ROBUST_OUT}/a_file && ${EXPECT_ERROR} 2 'a_file/out: cannot create directory: Not a directory$' -- ${CV} --cases ${BAD_CASES}/good.ini --case tiny_bs1 --out ${ROBUST_OUT}/a_file/out")
add_test(NAME robust.out.in_proc
  COMMAND ${EXPECT_ERROR} 2 "^ckpt-verify: /proc/ckpt-verify-test: cannot create directory"
  -- ${CV} --cases ${BAD_CASES}/good.ini --case tiny_bs1 --out /proc/ckpt-verify-test/out)
# A report that cannot be written leaves the previous one as it was, and
# the run ends in exit 1, not a crash (a failed HDF5 close used to leave a
# half-closed file that HDF5's exit-time cleanup crashed on: exit 139).
add_test(NAME robust.out.failed_write_keeps_previous_report
  COMMAND bash -c "d=${ROBUST_OUT}/previous; rm -rf $d; ${CV} --cases ${BAD_CASES}/good.ini --case tiny_bs1 --out $d >/dev/null || exit 1; sum=$(cksum < $d/tiny_bs1.h5); (ulimit -f 20; exec ${CV} --cases ${BAD_CASES}/good.ini --case tiny_bs1 --out $d); code=$?; test $code -eq 1 || { echo \"exit $code, wanted 1\"; exit 1; }; test \"$(cksum < $d/tiny_bs1.h5)\" = \"$sum\" && ${CV} diff $d/tiny_bs1.h5 $d/tiny_bs1.h5 >/dev/null")
add_test(NAME robust.out.full_disk_keeps_previous_files
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/full_disk.sh ${CV} ${BAD_CASES}/good.ini tiny_bs1 ${ROBUST_OUT}/full_disk ${CKPT_PYTHON})
# What a run leaves tells one story: an unwritten report is an ERROR in
# summary.json and junit.xml, and the two are replaced together or not at all.
add_test(NAME robust.out.unwritten_report_is_error_in_summary_and_junit
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/outputs_agree.sh report ${CV} ${BAD_CASES}/good.ini tiny_bs1 ${ROBUST_OUT}/agree_report ${CKPT_PYTHON})
add_test(NAME robust.out.summary_and_junit_replaced_together
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/outputs_agree.sh pair ${CV} ${BAD_CASES}/good.ini tiny_bs1 ${ROBUST_OUT}/agree_pair ${CKPT_PYTHON})
set_tests_properties(robust.out.unwritten_report_is_error_in_summary_and_junit
  robust.out.summary_and_junit_replaced_together PROPERTIES LABELS "robust")
# SIGKILL while a report is being written leaves no partial file.
add_test(NAME robust.out.killed_mid_write_leaves_no_partial_file
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/kill_mid_write.sh ${CV} ${BAD_CASES}/kill.ini ${ROBUST_OUT}/killed ${CKPT_PYTHON})
set_tests_properties(robust.out.under_a_regular_file robust.out.in_proc robust.out.failed_write_keeps_previous_report
  robust.out.full_disk_keeps_previous_files robust.out.killed_mid_write_leaves_no_partial_file PROPERTIES LABELS "robust")

# An --external command does not outlive ckpt-verify: SIGKILL it while
# the command runs, and what the command started is gone too.
add_test(NAME robust.external.command_dies_with_a_killed_harness
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/external_dies_with_harness.sh ${CV} ${ROBUST_OUT}/external_killed)
set_tests_properties(robust.external.command_dies_with_a_killed_harness PROPERTIES LABELS "robust" TIMEOUT 120)

# ---- fuzz regression inputs, replayed by every build (gcc, ASan) ----------
foreach(target case_file h5_compare)
  add_executable(replay_${target} fuzz/fuzz_${target}.c fuzz/replay_main.c)
  target_include_directories(replay_${target} PRIVATE fuzz)
  target_compile_options(replay_${target} PRIVATE ${CKPT_C_WARNINGS} ${CKPT_SAN_FLAGS})
  target_link_libraries(replay_${target} PRIVATE ckpt_core)
  add_test(NAME robust.fuzz_regressions.${target}
    COMMAND replay_${target} ${CMAKE_SOURCE_DIR}/tests/data/fuzz/${target})
  set_tests_properties(robust.fuzz_regressions.${target} PROPERTIES LABELS "robust")
endforeach()

# ---- memcheck over the README's triage command: no invalid access, no leak
# (scripts/valgrind.supp holds the reports of code outside ours that are no
# bug). Not in the sanitizer build: valgrind and ASan cannot share a process.
# tests/valgrind_memcheck.sh turns a SIGILL that valgrind meets in code
# outside ours (an instruction it does not emulate on this CPU) into Skipped
# with the reason, and one in our own code into a failure.
find_program(CKPT_VALGRIND valgrind)
if(CKPT_VALGRIND AND NOT CKPT_SANITIZE)
  set(MEMCHECK ${CMAKE_SOURCE_DIR}/tests/valgrind_memcheck.sh)
  add_test(NAME robust.valgrind.bias_gelu_bs1
    COMMAND ${MEMCHECK} -- ${CKPT_VALGRIND} -q --error-exitcode=1 --leak-check=full
      --suppressions=${CMAKE_SOURCE_DIR}/scripts/valgrind.supp
      ${CV} --case bias_gelu_bs1 --out ${ROBUST_OUT}/valgrind)
  set_tests_properties(robust.valgrind.bias_gelu_bs1 PROPERTIES LABELS "robust;valgrind" TIMEOUT 600
    SKIP_RETURN_CODE 77)

  # The planted input: a library outside ours whose initialiser uses AVX-512
  # (tests/fixtures/valgrind_foreign.c). Natively it runs where the CPU has
  # AVX-512 (elsewhere these two tests are Skipped, saying so); under
  # valgrind it dies with SIGILL before main, as libhwy did.
  add_library(valgrind_foreign_fixture SHARED tests/fixtures/valgrind_foreign.c)
  # -g0: built like a distribution library (no debug info), so valgrind names
  # its object; a frame with a source file and no object counts as ours.
  target_compile_options(valgrind_foreign_fixture PRIVATE -mavx512f -O1 -g0)
  add_executable(valgrind_sigill_fixture tests/fixtures/valgrind_foreign_main.c)
  target_link_libraries(valgrind_sigill_fixture PRIVATE valgrind_foreign_fixture)
  set(NATIVE_OR_SKIP "$<TARGET_FILE:valgrind_sigill_fixture> >/dev/null 2>&1 || { echo 'skipped: this CPU has no AVX-512, so the fixture cannot run natively'; exit 77; }")
  add_test(NAME robust.valgrind.sigill_outside_our_code_is_skipped_with_the_reason
    COMMAND bash -c "${NATIVE_OR_SKIP}; ${CMAKE_SOURCE_DIR}/tests/expect.sh 77 '^skipped: valgrind cannot emulate an instruction in libvalgrind_foreign_fixture.so, outside ckpt-verify \\(at 0x[0-9A-Fa-f]+: valgrind_foreign_init' -- ${MEMCHECK} -- ${CKPT_VALGRIND} -q $<TARGET_FILE:valgrind_sigill_fixture>")
  add_test(NAME robust.valgrind.sigill_in_our_code_fails
    COMMAND bash -c "${NATIVE_OR_SKIP}; ${CMAKE_SOURCE_DIR}/tests/expect.sh 1 'valgrind_memcheck: SIGILL in our own code: at 0x[0-9A-Fa-f]+: valgrind_foreign_init' -- ${MEMCHECK} --ours libvalgrind_foreign_fixture -- ${CKPT_VALGRIND} -q $<TARGET_FILE:valgrind_sigill_fixture>; r=$?; if [ $r -eq 77 ]; then echo 'our own SIGILL was skipped'; exit 1; fi; exit $r")
  set_tests_properties(robust.valgrind.sigill_outside_our_code_is_skipped_with_the_reason
    robust.valgrind.sigill_in_our_code_fails PROPERTIES LABELS "robust;valgrind" SKIP_RETURN_CODE 77)
endif()

# ---- external programs are bounded (issue 49) --------------------------------
# A gnuplot that never finishes is killed past CKPT_CHILD_TIMEOUT (default
# 20 s) with what it started: a run, `html` and `plot` end and say "plots
# not drawn: gnuplot did not finish in N s"; the run's exit code is its
# verdicts'. (TIMEOUT 120: a hang fails the test.)
add_test(NAME robust.child.hanging_gnuplot_is_killed_and_named
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/child_timeout.sh ${CV} ${BAD_CASES}/good.ini ${ROBUST_OUT}/child_timeout)
set_tests_properties(robust.child.hanging_gnuplot_is_killed_and_named PROPERTIES LABELS "robust" TIMEOUT 120)
