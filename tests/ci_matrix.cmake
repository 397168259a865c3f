# docs/ci/nightly-matrix.yml (the nightly suite as a GitHub Actions matrix:
# shard jobs, then merge --strict) runs its harness steps locally with two
# shards of the smoke suite: each step exits 0 and the merged report has
# every shard's records (tests/ci_matrix.py).
add_test(NAME ci.nightly_matrix_runs_locally_with_two_shards
  COMMAND ${CKPT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/ci_matrix.py ${CMAKE_SOURCE_DIR}/docs/ci/nightly-matrix.yml
    ${CMAKE_BINARY_DIR} ${CMAKE_BINARY_DIR}/ci_matrix smoke)
set_tests_properties(ci.nightly_matrix_runs_locally_with_two_shards PROPERTIES LABELS "nightly;ci" TIMEOUT 600)
