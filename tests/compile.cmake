# torch.compile (label `compile`): tests/python/compile/compile_cases.py's
# cases through verify(baselines={"compiled": ...}) and the C judge, each
# run held to its verdict and reason (docs/compile.md). aot_eager runs
# AOTAutograd's own partitioner (min_cut_rematerialization_partition)
# without Inductor's C++ compile; two cases, `plain_inductor` and
# `dropout_inductor`, compile as people write it (torch.compile(model),
# Module.compile(), Inductor's default options), its cache inside the build
# folder (hermetic: a fresh build compiles from nothing, the label's
# measured time).
set(COMPILE_OUT ${CMAKE_BINARY_DIR}/compile)
set(COMPILE_ENV "CKPT_VERIFY=$<TARGET_FILE:ckpt-verify>" "CKPT_ATEN_LIB=$<TARGET_FILE:ckpt_aten>"
  "PYTHONPATH=${CMAKE_SOURCE_DIR}/python" "TORCHINDUCTOR_CACHE_DIR=${COMPILE_OUT}/inductor_cache"
  # Inductor compiles in this process: no pool of compile workers to start on 2 cores.
  "TORCHINDUCTOR_COMPILE_THREADS=1")
foreach(case nonreentrant dropout policies plain_inductor dropout_inductor)
  add_test(NAME compile.${case}
    COMMAND ${CKPT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/python/compile/compile_cases.py ${case} ${COMPILE_OUT}/${case})
  set_tests_properties(compile.${case} PROPERTIES LABELS "compile" ENVIRONMENT "${COMPILE_ENV}" TIMEOUT 240)
endforeach()
# Inductor's C++ compile from a cold cache dominates these two (plain_inductor
# measured 153 to 240 s with the machine's two cores shared): a wide limit,
# so that a loaded CI machine is slow, not red. The label's time is
# measured, not enforced here (docs/compile.md).
set_tests_properties(compile.plain_inductor compile.dropout_inductor PROPERTIES TIMEOUT 900)
# pytorch #143176, compiled autograd around an eager checkpoint's backward:
# Dynamo recompiles the pieces of each captured backward (about a minute
# here), so it has its own label, outside `compile`'s 4 minutes.
add_test(NAME compile.compiled_autograd_eager_checkpoint
  COMMAND ${CKPT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/python/compile/compile_cases.py compiled_autograd
    ${COMPILE_OUT}/compiled_autograd)
set_tests_properties(compile.compiled_autograd_eager_checkpoint PROPERTIES LABELS "compiled_autograd"
  ENVIRONMENT "${COMPILE_ENV}" TIMEOUT 300)
# The evidence read off the partitioned graphs agrees with what
# saved_tensors_hooks sees autograd keep (count and bytes), for plain,
# checkpointed and planted compiled steps; it prints docs/compile.md's table.
add_test(NAME compile.evidence_agrees_with_saved_tensors_hooks
  COMMAND ${CKPT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/python/compile/measure_table.py)
# What verify(baselines=...) refuses: an unknown family, a family named like
# the built-in baselines, a twin name /case expect cannot hold, and a
# compiled family whose step checkpoints (CheckpointInBaseline).
add_test(NAME compile.families_refuse_what_cannot_be_judged
  COMMAND ${CKPT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/python/compile/check_families.py)
# torch.compile by name (its default backend, or any other that is not
# compile_evidence.backend) records no evidence: every verdict says so.
add_test(NAME compile.plain_torch_compile_is_never_silent
  COMMAND ${CKPT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/python/compile/check_unrecorded.py)
set_tests_properties(compile.evidence_agrees_with_saved_tensors_hooks compile.families_refuse_what_cannot_be_judged
  compile.plain_torch_compile_is_never_silent
  PROPERTIES LABELS "compile" ENVIRONMENT "${COMPILE_ENV}" TIMEOUT 240)
# The _vs_eager twins (tests/python/compile/test_twins.py, pytest): a planted
# run expected to FAIL leaves the report ok, its twin not judged; a correct
# run's twin is NOISE saying what it compared; `ckpt-verify judge` on the
# file agrees. aot_eager with a partitioner whose backward rounds otherwise
# stands in for a compiler that rounds otherwise than eager.
add_test(NAME compile.twins
  COMMAND ${CKPT_PYTHON} -m pytest -q -p no:cacheprovider ${CMAKE_SOURCE_DIR}/tests/python/compile/test_twins.py)
set_tests_properties(compile.twins PROPERTIES LABELS "compile" ENVIRONMENT "${COMPILE_ENV}" TIMEOUT 240)
# docs/compile.md's walkthrough runs as written and gets the verdicts it shows.
file(MAKE_DIRECTORY ${COMPILE_OUT}/walkthrough)
add_test(NAME compile.walkthrough_passes
  COMMAND ${CKPT_PYTHON} ${CMAKE_SOURCE_DIR}/python/examples/compile_checkpoint.py
  WORKING_DIRECTORY ${COMPILE_OUT}/walkthrough)
set_tests_properties(compile.walkthrough_passes PROPERTIES LABELS "compile" ENVIRONMENT "${COMPILE_ENV}" TIMEOUT 240)
