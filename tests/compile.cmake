# torch.compile (label `compile`): tests/python/compile/compile_cases.py's
# cases through verify(baselines={"compiled": ...}) and the C judge, each
# run held to its verdict and reason (docs/compile.md). aot_eager only:
# it runs AOTAutograd's own partitioner (min_cut_rematerialization_partition)
# without Inductor's C++ compile, so the label stays well under 4 minutes.
set(COMPILE_OUT ${CMAKE_BINARY_DIR}/compile)
set(COMPILE_ENV "CKPT_VERIFY=$<TARGET_FILE:ckpt-verify>" "CKPT_ATEN_LIB=$<TARGET_FILE:ckpt_aten>"
  "PYTHONPATH=${CMAKE_SOURCE_DIR}/python")
foreach(case nonreentrant dropout)
  add_test(NAME compile.${case}
    COMMAND ${CKPT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/python/compile/compile_cases.py ${case} ${COMPILE_OUT}/${case})
  set_tests_properties(compile.${case} PROPERTIES LABELS "compile" ENVIRONMENT "${COMPILE_ENV}" TIMEOUT 240)
endforeach()
