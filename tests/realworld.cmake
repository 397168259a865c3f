# The realworld suite (label `realworld`, docs/realworld.md): checkpoints
# that people ship (torch, transformers, fairscale, DeepSpeed, megatron-core,
# TransformerEngine), verified through ckpt_verify.verify() and this build's
# judge. One test per group of cases (scripts/realworld.py run): exit 0 when
# every verdict is the expected one, 77 (Skipped, the first line saying why)
# when every run of the group cannot run here. Each writes its rows to
# build/realworld/<group>.json; realworld.table_matches_docs then renders
# them and compares with the table in docs/realworld.md (CI's, on the CPU).
# Not in a sanitizer build: these tests check the frameworks, not the C
# code, and would only run the same Python again.
if(CKPT_SANITIZE)
  return()
endif()
set(RW_OUT ${CMAKE_BINARY_DIR}/realworld)
set(RW_ENV "CKPT_VERIFY=$<TARGET_FILE:ckpt-verify>" "CKPT_ATEN_LIB=$<TARGET_FILE:ckpt_aten>")
# group -> the cases it runs (scripts/realworld.py list names them all; the
# table check fails when a case is in no group: --all-cases).
set(RW_GROUPS
  "torch --case torch_checkpoint --case torch_checkpoint_autocast"
  "torch_compile --case torch_compile_checkpoint"
  "transformers --framework transformers"
  "fairscale --framework fairscale"
  "deepspeed --framework deepspeed"
  "megatron --framework megatron"
  "transformer_engine --framework transformer_engine")
set(RW_RESULTS)
foreach(group IN LISTS RW_GROUPS)
  separate_arguments(group)
  list(POP_FRONT group name)
  add_test(NAME realworld.${name}
    COMMAND ${CKPT_PYTHON} ${CMAKE_SOURCE_DIR}/scripts/realworld.py run ${group} --out-dir ${RW_OUT}/${name}
      --results ${RW_OUT}/${name}.json --junit ${RW_OUT}/${name}.junit.xml)
  set_tests_properties(realworld.${name} PROPERTIES LABELS "realworld" ENVIRONMENT "${RW_ENV}"
    SKIP_RETURN_CODE 77 FIXTURES_SETUP realworld_results TIMEOUT 900)
  list(APPEND RW_RESULTS ${RW_OUT}/${name}.json)
endforeach()
set_tests_properties(realworld.megatron realworld.transformer_engine PROPERTIES LABELS "realworld;gpu")
add_test(NAME realworld.table_matches_docs
  COMMAND ${CKPT_PYTHON} ${CMAKE_SOURCE_DIR}/scripts/realworld.py table ${RW_RESULTS}
    --check ${CMAKE_SOURCE_DIR}/docs/realworld.md --cpu-only --all-cases)
set_tests_properties(realworld.table_matches_docs PROPERTIES LABELS "realworld" SKIP_RETURN_CODE 77
  FIXTURES_REQUIRED realworld_results)
