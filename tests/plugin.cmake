# --impl-lib: checkpoint impls from a shared library (impls/plugin.h). The
# example plugin's correct checkpoint must PASS (bitwise, dropout included)
# and its planted variant FAIL; libraries with the wrong ABI, without the
# symbol, or calling a function the binary lacks are input errors (exit 2).
set(CV $<TARGET_FILE:ckpt-verify>)
set(EXPECT ${CMAKE_SOURCE_DIR}/tests/expect.sh)
set(EXPECT_ERROR ${CMAKE_SOURCE_DIR}/tests/expect_error.sh)

add_library(ckpt_example_plugin MODULE impls/plugin/example_checkpoint.c)
target_compile_options(ckpt_example_plugin PRIVATE ${CKPT_C_WARNINGS})
target_include_directories(ckpt_example_plugin PRIVATE ${CKPT_HARNESS_INCLUDES} impls)
foreach(bad bad_abi no_symbol missing_function zeros_on_device_0)
  add_library(ckpt_plugin_${bad} MODULE tests/plugins/${bad}.c)
  target_include_directories(ckpt_plugin_${bad} PRIVATE ${CKPT_HARNESS_INCLUDES} impls)
  target_compile_options(ckpt_plugin_${bad} PRIVATE ${CKPT_C_WARNINGS})
endforeach()
set(EXAMPLE_PLUGIN $<TARGET_FILE:ckpt_example_plugin>)

foreach(case mlp_seg2 gpt_bias_gelu)
  add_test(NAME plugin.example_${case}
    COMMAND ${EXPECT} 0 "example_checkpoint +PASS +yes +0 " "example_no_rng_replay +FAIL +yes"
            "all verdicts as expected"
    -- ${CV} --impl-lib ${EXAMPLE_PLUGIN} --case ${case} --impl example_checkpoint,example_no_rng_replay
       --out ${CMAKE_BINARY_DIR}/it/plugin_${case})
  set_tests_properties(plugin.example_${case} PROPERTIES LABELS "plugin")
endforeach()
# A plugin plants a bug in the harness's own reference as impls/faulty/
# does: the non-reentrant reference with its rng_replay service replaced.
add_test(NAME plugin.example_planted_service_in_reference
  COMMAND ${EXPECT} 0 "example_nr_no_rng_replay +FAIL +yes" "nonreentrant +PASS +yes" "all verdicts as expected"
  -- ${CV} --impl-lib ${EXAMPLE_PLUGIN} --case mlp_seg2 --impl nonreentrant,example_nr_no_rng_replay
     --out ${CMAKE_BINARY_DIR}/it/plugin_planted_service)
set_tests_properties(plugin.example_planted_service_in_reference PROPERTIES LABELS "plugin")
# A model with buffers: the example replays them (PASS, buffers bitwise); the
# harness's own state_double_update beside it shows what not replaying does.
add_test(NAME plugin.example_replays_module_state
  COMMAND ${EXPECT} 0 "example_checkpoint +PASS +yes +0 .*" "per-step buffers"
          "state_double_update +FAIL +yes .*steps/1/buffers/l0.bn.running_mean"
  -- ${CV} --impl-lib ${EXAMPLE_PLUGIN} --case state_bn_mlp_segevery --impl example_checkpoint,state_double_update
     --out ${CMAKE_BINARY_DIR}/it/plugin_state)
set_tests_properties(plugin.example_replays_module_state PROPERTIES LABELS "plugin")
add_test(NAME plugin.listed_in_help
  COMMAND ${EXPECT} 0 "example_checkpoint +plugin example" -- ${CV} --impl-lib ${EXAMPLE_PLUGIN} --help)
add_test(NAME plugin.wrong_abi_version_is_input_error
  COMMAND ${EXPECT_ERROR} 2 "libckpt_plugin_bad_abi\\.so: plugin built for ABI version 6 .* loads version 5"
  -- ${CV} --impl-lib $<TARGET_FILE:ckpt_plugin_bad_abi> --case bias_gelu_bs1)
add_test(NAME plugin.missing_entry_symbol_is_input_error
  COMMAND ${EXPECT_ERROR} 2 "libckpt_plugin_no_symbol\\.so: not a ckpt-verify plugin: no symbol ckpt_verify_plugin"
  -- ${CV} --impl-lib $<TARGET_FILE:ckpt_plugin_no_symbol> --case bias_gelu_bs1)
add_test(NAME plugin.missing_function_is_input_error
  COMMAND ${EXPECT_ERROR} 2 "cannot load plugin: .*ckpt_function_that_does_not_exist"
  -- ${CV} --impl-lib $<TARGET_FILE:ckpt_plugin_missing_function> --case bias_gelu_bs1)
add_test(NAME plugin.judge_knows_planted_plugin_impls
  COMMAND bash -c "${CV} judge --impl-lib ${EXAMPLE_PLUGIN} ${CMAKE_BINARY_DIR}/it/plugin_mlp_seg2/mlp_seg2.h5 | grep -E 'example_no_rng_replay +FAIL +yes'")
set_tests_properties(plugin.judge_knows_planted_plugin_impls PROPERTIES DEPENDS plugin.example_mlp_seg2)
# A run that fails inside (its checkpoint makes tensors on cuda:0 for a CPU
# case, as the tape once did) is that run's ERROR with its message; the
# suite goes on to the next case and ends with its summary (exit 1: an
# unexpected verdict), never stopping at the first case.
add_test(NAME plugin.run_failing_inside_is_its_error_and_the_suite_goes_on
  COMMAND ${EXPECT} 1 "zeros_on_device_0 +ERROR +NO" "backward of checkpoint_reentrant: tensor_zeros" "reentrant +PASS +yes" "^2 case\\(s\\); UNEXPECTED"
  -- ${CV} --impl-lib $<TARGET_FILE:ckpt_plugin_zeros_on_device_0> --case mlp_seg2 --case bias_gelu_bs1
     --impl zeros_on_device_0,reentrant --out ${CMAKE_BINARY_DIR}/it/plugin_zeros_on_device_0)
set_tests_properties(plugin.run_failing_inside_is_its_error_and_the_suite_goes_on PROPERTIES LABELS "plugin")
