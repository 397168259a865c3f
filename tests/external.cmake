# --external: another producer's runs appended to a harness report and
# judged with its runs. The torch adapter (scripts/external_torch.py) must
# PASS on a fused and a gpt case, a planted torch bug must FAIL, and a
# command that fails or writes a malformed report is an input error that
# leaves the harness's report as it wrote it.
set(CV $<TARGET_FILE:ckpt-verify>)
set(EXPECT ${CMAKE_SOURCE_DIR}/tests/expect.sh)
set(EXPECT_ERROR ${CMAKE_SOURCE_DIR}/tests/expect_error.sh)
set(EXT_OUT ${CMAKE_BINARY_DIR}/it/external)
set(TORCH_ADAPTER "${CKPT_PYTHON} ${CMAKE_SOURCE_DIR}/scripts/external_torch.py")
set(BAD_EXTERNAL "${CKPT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/external_bad.py")

foreach(case bias_gelu_bs1 gpt_none)
  add_test(NAME external.torch_adapter_${case}
    COMMAND ${EXPECT} 0 "torch_reentrant +PASS +yes +0 " "torch_nonreentrant +PASS +yes +0 "
            "bitwise identical to torch_baseline_0" "reentrant +PASS +yes" "all verdicts as expected"
    -- ${CV} --case ${case} --out ${EXT_OUT}/${case} --external "${TORCH_ADAPTER}")
  set_tests_properties(external.torch_adapter_${case} PROPERTIES LABELS "external")
endforeach()

# The adapter as docs/external.md gives it: its own path as the command, from
# a directory outside the tree, under whatever python3 PATH finds (one
# without h5py or torch makes it run again under the tree's environment).
file(MAKE_DIRECTORY ${CMAKE_BINARY_DIR}/it/elsewhere)
add_test(NAME external.torch_adapter_runs_from_outside_the_tree
  COMMAND ${EXPECT} 0 "torch_reentrant +PASS +yes +0 " "torch_nonreentrant +PASS +yes +0 " "all verdicts as expected"
  -- ${CV} --case bias_gelu_bs1 --out ${EXT_OUT}/elsewhere --external "${CMAKE_SOURCE_DIR}/scripts/external_torch.py"
  WORKING_DIRECTORY ${CMAKE_BINARY_DIR}/it/elsewhere)
set_tests_properties(external.torch_adapter_runs_from_outside_the_tree PROPERTIES LABELS "external")

add_test(NAME external.planted_torch_rng_bug_fails
  COMMAND ${EXPECT} 1 "torch_reentrant +FAIL +NO" "torch_nonreentrant +FAIL +NO" "UNEXPECTED"
  -- ${CV} --case mlp_seg2 --out ${EXT_OUT}/planted --external "${TORCH_ADAPTER} --plant no_rng_preserve")

add_test(NAME external.failing_command_is_input_error
  COMMAND bash -c "rm -rf ${EXT_OUT}/fails && ${EXPECT_ERROR} 2 \"^ckpt-verify: external command 'false' failed \\\\(exit 1\\\\)$\" -- ${CV} --case bias_gelu_bs1 --out ${EXT_OUT}/fails --external false && test -s ${EXT_OUT}/fails/bias_gelu_bs1.h5 && test ! -e ${EXT_OUT}/fails/summary.json && ! ls ${EXT_OUT}/fails | grep -q tmp")
foreach(mode_regex "no_loss|wrote a malformed run.*/runs/mine/steps/1.*loss"
                   "remove_run|removed run nonreentrant from the report"
                   "bad_outcome|wrote a malformed run.*outcome is 'exploded'")
  string(REPLACE "|" ";" parts "${mode_regex}")
  list(GET parts 0 mode)
  list(GET parts 1 regex)
  add_test(NAME external.${mode}_is_input_error
    COMMAND bash -c "rm -rf ${EXT_OUT}/${mode} && ${EXPECT_ERROR} 2 \"${regex}\" -- ${CV} --case bias_gelu_bs1 --out ${EXT_OUT}/${mode} --external '${BAD_EXTERNAL} ${mode}' && ${CV} diff ${EXT_OUT}/${mode}/bias_gelu_bs1.h5:nonreentrant ${EXT_OUT}/${mode}/bias_gelu_bs1.h5:baseline_0 >/dev/null")
endforeach()

# A command that hangs is stopped (its whole process group) after
# --external-timeout seconds: an input error, the report as the harness
# wrote it, no temporary and no process left behind. The command's own
# process id is what is checked (it writes it, then becomes the sleep), not
# a process name that another job on the machine may share.
add_test(NAME external.hanging_command_times_out
  COMMAND bash -c "rm -rf ${EXT_OUT}/hangs ${EXT_OUT}/hangs.pid && ${EXPECT_ERROR} 2 \"^ckpt-verify: external command 'echo .* && exec sleep 300 && true' did not finish within 1 s \\\\(--external-timeout\\\\); stopped$\" -- ${CV} --case bias_gelu_bs1 --out ${EXT_OUT}/hangs --external 'echo $$ > ${EXT_OUT}/hangs.pid && exec sleep 300 && true' --external-timeout 1 && test -s ${EXT_OUT}/hangs/bias_gelu_bs1.h5 && ! ls ${EXT_OUT}/hangs | grep -q tmp && test -s ${EXT_OUT}/hangs.pid && ! kill -0 $(cat ${EXT_OUT}/hangs.pid) 2>/dev/null")
set_tests_properties(external.hanging_command_times_out PROPERTIES LABELS "external" TIMEOUT 60)

# An external producer's runs are judged against its own baselines: each
# record's overhead is its step time over the baseline_step_ms it records
# (torch_baseline's, not the harness's), and overhead_baseline names it.
add_test(NAME external.overhead_divides_by_the_baseline_it_records
  COMMAND bash -c "rm -rf ${EXT_OUT}/ratios && ${CV} --case bias_gelu_bs1 --out ${EXT_OUT}/ratios --external '${TORCH_ADAPTER}' >/dev/null && ${CKPT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/summary_tool.py ratios-match ${EXT_OUT}/ratios torch_baseline")
set_tests_properties(external.overhead_divides_by_the_baseline_it_records PROPERTIES LABELS "external")
