# The planted-bug suite (cases/mutation.ini, impls/faulty/): every planted
# bug is caught where it can show and NOT_OBSERVABLE where it cannot, every
# expectation exact; and a planted bug expected to PASS makes the run fail.
set(MUT_CV $<TARGET_FILE:ckpt-verify>)
set(MUT_EXPECT ${CMAKE_SOURCE_DIR}/tests/expect.sh)
set(MUT_OUT ${CMAKE_BINARY_DIR}/it/mutation)

# Exit 0 = every expectation met. The patterns pin down what each detector
# reports: the step, the tensor, and for the saved-tensor checks the
# recomputed tensor.
add_test(NAME mutation.suite
  COMMAND ${MUT_EXPECT} 0 "all verdicts as expected"
    "no_rng_stash +FAIL +yes .*steps/1/grads/"
    "rng_not_forked +FAIL +yes .*steps/2/loss"
    "autocast_not_restored +FAIL +yes .*steps/1/grads/"
    "autocast_not_restored_nr +FAIL +yes .*step 1: .*recomputed saved tensor #[0-9]+ \\(op linear\\) has dtype float32; the forward saved bfloat16"
    "counter_reset +FAIL +yes .*step 1: .*recomputed saved tensor #0 \\(op linear\\) differs from the forward's \\(value fingerprint\\)"
    "counter_reset +FAIL +yes .*step 1: .*recomputed saved tensor #0 \\(op layer_norm\\) differs from the forward's \\(value fingerprint\\)"
    "first_call_kernel +FAIL +yes .*step 1: .*recomputed saved tensor #[0-9]+ \\(op linear\\) differs from the forward's"
    "stale_input +FAIL +yes .*step 1: backward of checkpoint_reentrant: saved tensor #0 of checkpoint_reentrant was modified by an inplace operation after it was saved"
    "recompute_elided +MEMFAIL +yes"
    "state_double_update +FAIL +yes .*steps/1/buffers/l0.bn.running_mean"
    "amax_updated_in_recompute +FAIL +yes .*steps/1/buffers/l0.amax_history"
    "scale_not_restored +FAIL +yes .*steps/1/grads/"
    "planted bug cannot show here \\(bn_mlp's batch norm in training reads no state"
    "hook_fires_twice +FAIL +yes .*checks/hook_fires/l0\\.bias \\[0, 0\\] = 2"
    "leaked_recompute_frame +FAIL +yes .*checks/step_start_bytes \\[1\\] = "
    "planted bug cannot show here \\(CPU case"
    "planted bug cannot show here \\(dropout = 0"
    "planted bug x case"
  -- ${MUT_CV} --suite mutation --out ${MUT_OUT}/suite)
set_tests_properties(mutation.suite PROPERTIES LABELS "mutation")

# The check can fail: the same planted bug, expected to PASS, is an
# unexpected verdict and the run exits 1.
file(WRITE ${CMAKE_BINARY_DIR}/mutation_expect_pass.ini
  "[case:mutation_expect_pass]\nmodel = mlp\nlayers = 4\nhidden = 32\nseq = 4\nbatch = 4\nsegments = 2\n"
  "dropout = 0.1\nimpls = reentrant, no_rng_stash\nexpect = no_rng_stash:PASS\nlabels = mutation_self_test\n")
add_test(NAME mutation.planted_bug_expected_pass_fails
  COMMAND ${MUT_EXPECT} 1 "no_rng_stash +FAIL +NO " "UNEXPECTED verdicts"
  -- ${MUT_CV} --cases ${CMAKE_BINARY_DIR}/mutation_expect_pass.ini --suite mutation_self_test
     --out ${MUT_OUT}/expect_pass)
set_tests_properties(mutation.planted_bug_expected_pass_fails PROPERTIES LABELS "mutation")

# The mutation suite of the code itself (tests/mutants/*.patch, realistic
# mistakes in impls/, harness/autograd/ and the judge's detectors in
# harness/judge/, those killed by unit.judge): scripts/mutants.sh applies each
# to a copy of the tree (never the tree), rebuilds ckpt-verify there
# incrementally (build/mutants), runs the smoke suite and counts the mutants
# the suite kills; it fails below 95% and lists the survivors. The copy's
# first build is a full one (minutes); later runs rebuild one file per mutant.
add_test(NAME mutants.score_at_least_95_percent
  COMMAND bash ${CMAKE_SOURCE_DIR}/scripts/mutants.sh --work ${CMAKE_BINARY_DIR}/mutants)
set_tests_properties(mutants.score_at_least_95_percent PROPERTIES LABELS "mutants" TIMEOUT 2400 RUN_SERIAL TRUE)
