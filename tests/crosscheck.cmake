# Cross-check against PyTorch's own torch.utils.checkpoint (label
# `crosscheck`): each test runs cases in ckpt-verify, again in PyTorch from
# the HDF5 report alone (scripts/torch_crosscheck.py), and compares the
# pairs with `ckpt-verify diff` (scripts/crosscheck.sh). On CPU both call the
# same ATen kernels, so a pair must be bitwise identical unless the case has
# a documented cause of difference, and then within its bound.
set(CC_RUN ${CMAKE_SOURCE_DIR}/tests/expect.sh)
set(CC_SCRIPT ${CMAKE_SOURCE_DIR}/scripts/crosscheck.sh
  --ckpt-verify $<TARGET_FILE:ckpt-verify> --python ${CKPT_PYTHON})
set(CC_OUT ${CMAKE_BINARY_DIR}/crosscheck)
# "ok: <case> <run> vs <torch run>: bitwise identical", for all three pairs.
set(CC_BITWISE "ok: [a-z0-9_]+ baseline_0 vs torch_none: bitwise identical"
  "ok: [a-z0-9_]+ reentrant vs torch_reentrant: bitwise identical"
  "ok: [a-z0-9_]+ nonreentrant vs torch_nonreentrant: bitwise identical")

# Bitwise: the mlp (one segment per layer; and 2 segments of 4 layers, the
# last run plainly), dropout throughout; preserve_rng_state = false (the
# harness's wrong gradients are torch's wrong gradients, bit for bit).
add_test(NAME crosscheck.mlp
  COMMAND ${CC_RUN} 0 ${CC_BITWISE} "every pair bitwise identical"
  -- ${CC_SCRIPT} --out ${CC_OUT}/mlp none_bs4 mlp_seg2 mlp_no_preserve_rng)
# Bitwise: the transformer block (layer norm, attention, bias-dropout-add).
add_test(NAME crosscheck.gpt
  COMMAND ${CC_RUN} 0 ${CC_BITWISE} -- ${CC_SCRIPT} --out ${CC_OUT}/gpt gpt_none)
# Bitwise: one tensor with three consumers (accumulation order), and the
# mlp under torch's own CPU autocast (bfloat16).
add_test(NAME crosscheck.branchy_autocast_mlp
  COMMAND ${CC_RUN} 0 ${CC_BITWISE} -- ${CC_SCRIPT} --out ${CC_OUT}/branchy branchy_bs4 autocast_mlp_bf16)
# Bitwise: regions of three tensors in and out (one needing no grad in, one
# made under no_grad out) with the scale passed to torch.utils.checkpoint as
# a non-tensor argument; plain and under autocast.
add_test(NAME crosscheck.two_stream_regions
  COMMAND ${CC_RUN} 0 ${CC_BITWISE} "every pair bitwise identical"
  -- ${CC_SCRIPT} --out ${CC_OUT}/two_stream two_stream_every two_stream_seg2 two_stream_bf16)
# Bitwise: checkpoints nested 3 deep (mlp) and 2 deep around regions
# (two_stream), torch's checkpoint inside checkpoint, both styles.
add_test(NAME crosscheck.nested
  COMMAND ${CC_RUN} 0 ${CC_BITWISE} "every pair bitwise identical"
  -- ${CC_SCRIPT} --out ${CC_OUT}/nested nest_mlp_seg2 nest_two_stream)
# Documented bound: the harness's own fused bias+GELU kernel.
add_test(NAME crosscheck.fused_bias_gelu
  COMMAND ${CC_RUN} 0 "ok: bias_gelu_bs1 nonreentrant vs torch_nonreentrant: within the documented bound"
  -- ${CC_SCRIPT} --out ${CC_OUT}/fused bias_gelu_bs1)
# Bitwise: the gpt block under autocast with softmax in float32 as the
# harness's rules say (torch run with the same rules).
add_test(NAME crosscheck.autocast_gpt_harness_rules
  COMMAND ${CC_RUN} 0 ${CC_BITWISE}
  -- ${CC_SCRIPT} --rules harness --out ${CC_OUT}/autocast_gpt_harness autocast_gpt_bf16)
# Documented bound: the same case under torch 1.13's own CPU autocast
# rules, which leave softmax in bfloat16 (torch_crosscheck.py CAUSES).
add_test(NAME crosscheck.autocast_gpt_torch_rules
  COMMAND ${CC_RUN} 0 "ok: autocast_gpt_bf16 reentrant vs torch_reentrant: within the documented bound"
  -- ${CC_SCRIPT} --out ${CC_OUT}/autocast_gpt_torch autocast_gpt_bf16)

# Models with buffers: bitwise against torch checkpoints that replay the
# buffers (BatchNorm's native kernels included), and different, in the
# buffers, from torch's own checkpoint, which updates them twice.
set(CC_STATE "ok: [a-z0-9_]+ baseline_0 vs torch_none: bitwise identical"
  "ok: [a-z0-9_]+ reentrant vs torch_reentrant_state_replay: bitwise identical"
  "ok: [a-z0-9_]+ nonreentrant vs torch_nonreentrant_state_replay: bitwise identical"
  "ok: state_bn_mlp_segevery nonreentrant vs torch_nonreentrant: differs as documented: [0-9]+ buffer and 0 other"
  "ok: state_scaled_mlp_seg2 reentrant vs torch_reentrant: differs as documented: .*first steps/1/buffers/l0.amax_history")
add_test(NAME crosscheck.state_models
  COMMAND ${CC_RUN} 0 ${CC_STATE} -- ${CC_SCRIPT} --out ${CC_OUT}/state state_bn_mlp_segevery state_scaled_mlp_seg2)

# Selective checkpointing against torch 2.x's
# create_selective_checkpoint_contexts (same policy as ATen ops): bitwise.
add_test(NAME crosscheck.selective_torch2
  COMMAND ${CC_RUN} 0 "ok: selective_mlp_none selective vs torch_selective: bitwise identical"
    "ok: selective_gpt_attention_core_segevery selective vs torch_selective: bitwise identical"
    "ok: state_bn_mlp_selective selective vs torch_selective: bitwise identical"
  -- ${CC_SCRIPT} --selective --out ${CC_OUT}/selective selective_mlp_none selective_gpt_attention_core_segevery
     state_bn_mlp_selective)
# Bitwise under each backward call (cases/backward.ini): torch.autograd.grad,
# backward(inputs=) and a retained graph backwarded twice, against torch's
# own (its reentrant checkpoint refuses the first two, as the harness's does;
# its selective checkpoint refuses the second backward, which the harness's
# selective allows: that pair is reported not compared, with torch's error).
add_test(NAME crosscheck.backward_api
  COMMAND ${CC_RUN} 0
    "ok: backward_mlp_grad nonreentrant vs torch_nonreentrant: bitwise identical"
    "ok: backward_mlp_inputs nonreentrant vs torch_nonreentrant: bitwise identical"
    "ok: backward_gpt_twice nonreentrant vs torch_nonreentrant: bitwise identical"
    "ok: backward_reentrant_mlp_twice reentrant vs torch_reentrant: bitwise identical"
    "ok: backward_gpt_twice baseline_0 vs torch_none: bitwise identical"
    "ok: backward_mlp_grad selective vs torch_selective: bitwise identical"
    "ok: backward_mlp_inputs selective vs torch_selective: bitwise identical"
    "ok: backward_gpt_twice selective vs torch_selective: not compared: torch 2[.0-9]+.* refuses the case's backward \\(Trying to backward an extra time"
    "every pair bitwise identical"
  -- ${CC_SCRIPT} --out ${CC_OUT}/backward_api backward_mlp_grad backward_mlp_inputs backward_gpt_twice
     backward_reentrant_mlp_twice)

# torch's own switches of the non-reentrant checkpoint, as the case sets
# them: set_checkpoint_early_stop(False) for early_stop = false (the case
# uses the harness's fused bias+GELU: within that kernel's documented bound,
# as its baseline is) and determinism_check = "none" (bitwise).
add_test(NAME crosscheck.early_stop_and_determinism_check
  COMMAND ${CC_RUN} 0 "ok: checks_no_early_stop nonreentrant vs torch_nonreentrant: within the documented bound"
    "ok: checks_determinism_none nonreentrant vs torch_nonreentrant: bitwise identical"
    "every pair bitwise identical or within its documented bound"
  -- ${CC_SCRIPT} --out ${CC_OUT}/checks checks_no_early_stop checks_determinism_none)
# torch's determinism_check="default" (and debug=True's op trace) beside the
# harness's metadata check, on the same planted bug: a recompute that runs
# outside the forward's autocast. Both must fire; with the check off both
# end in the backward's dtype error instead.
add_test(NAME crosscheck.torch_determinism_check_fires_beside_ours
  COMMAND ${CKPT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/python/check_torch_determinism_check.py
    $<TARGET_FILE:ckpt-verify> ${CC_OUT}/determinism_check)

# The check can fail: planted differences must be reported.
# torch's checkpoint without the state replay: the replay pairs differ.
add_test(NAME crosscheck.planted_no_state_replay_is_caught
  COMMAND ${CC_RUN} 1 "UNEXPLAINED: state_bn_mlp_segevery reentrant vs torch_reentrant_state_replay: differs where"
  -- ${CC_SCRIPT} --plant no_state_replay --out ${CC_OUT}/planted_state state_bn_mlp_segevery)
# SGD as p -= lr * grad: a few ULP in step 2 and the final parameters.
add_test(NAME crosscheck.planted_sgd_rounding_is_caught
  COMMAND ${CC_RUN} 1 "UNEXPLAINED: none_bs4 baseline_0 vs torch_none: differs where"
  -- ${CC_SCRIPT} --plant sgd_mul --out ${CC_OUT}/planted_sgd none_bs4)
# No RNG replay in torch's checkpoints: beyond the fused kernel's bound.
add_test(NAME crosscheck.planted_rng_beyond_bound_is_caught
  COMMAND ${CC_RUN} 1 "UNEXPLAINED: bias_gelu_bs1 reentrant vs torch_reentrant: beyond the documented bound"
  "ok: bias_gelu_bs1 baseline_0 vs torch_none: within"
  -- ${CC_SCRIPT} --plant no_rng_preserve --out ${CC_OUT}/planted_rng bias_gelu_bs1)

set_tests_properties(crosscheck.mlp crosscheck.gpt crosscheck.branchy_autocast_mlp crosscheck.two_stream_regions
  crosscheck.nested crosscheck.fused_bias_gelu
  crosscheck.autocast_gpt_harness_rules crosscheck.autocast_gpt_torch_rules crosscheck.planted_sgd_rounding_is_caught crosscheck.planted_rng_beyond_bound_is_caught
  crosscheck.state_models crosscheck.planted_no_state_replay_is_caught crosscheck.selective_torch2
  crosscheck.backward_api crosscheck.early_stop_and_determinism_check
  crosscheck.torch_determinism_check_fires_beside_ours PROPERTIES LABELS "crosscheck")

# Side-by-side benchmark (label `bench`): the same model in ckpt-verify and
# in PyTorch, peaks from the same counting allocator, interleaved repeats;
# --quick is the small case (seconds). Fails when a measurement is missing
# or a peak-bytes ratio ours/torch leaves [1/1.5, 1.5]; step times are
# printed (median, IQR and min-max of the ratio), not checked.
set(BVT_ROW "( +[0-9.]+ +\\[[0-9.]+-[0-9.]+\\]){2} +[0-9.]+ +[0-9.]+-[0-9.]+ +[0-9.]+-[0-9.]+$")
add_test(NAME bench.vs_torch_quick
  COMMAND ${CC_RUN} 0 "^  none${BVT_ROW}" "^  reentrant${BVT_ROW}" "^  nonreentrant${BVT_ROW}"
    "^  nonreentrant( +[0-9.]+){3} "
  -- ${CKPT_PYTHON} ${CMAKE_SOURCE_DIR}/scripts/bench_vs_torch.py --quick
     --ckpt-verify $<TARGET_FILE:ckpt-verify> --lib $<TARGET_FILE:ckpt_aten>)
set_tests_properties(bench.vs_torch_quick PROPERTIES LABELS "bench")
