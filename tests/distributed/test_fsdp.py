"""FSDP (FullyShardedDataParallel, CPU with device_id=cpu) and FSDP2
(fully_shard) over two gloo ranks: activation checkpointing applied the way
torch documents passes bitwise against the plain sharded run and is NOISE
against one process; each rank records its shards and its bytes held at
the end of forward; a checkpoint around the FSDP unit is measured: the
all-gathers it repeats in backward, per rank."""
import h5py
import pytest
import torch
from models import (
    Stack,
    batch_fn,
    fsdp2_blocks,
    fsdp2_checkpoint_then_shard,
    fsdp2_shard_then_checkpoint,
    fsdp2_shard_then_reentrant,
    fsdp_checkpoint_inside,
    fsdp_checkpoint_outside,
    fsdp_reentrant_outside,
    fsdp_units,
    plain,
)

import ckpt_verify

UNIT_BYTES = (64 * 64 + 64) * 4  # one Block's full parameters, float32


@pytest.fixture(scope="module")
def fsdp(tmp_path_factory):
    out = tmp_path_factory.mktemp("fsdp") / "fsdp.h5"
    return ckpt_verify.verify(
        Stack, batch_fn,
        {"ac_inside_unit": ckpt_verify.DistRun(after_wrap=fsdp_checkpoint_inside),
         "ac_around_unit": ckpt_verify.DistRun(after_wrap=fsdp_checkpoint_outside),
         "reentrant_around_unit": ckpt_verify.DistRun(after_wrap=fsdp_reentrant_outside),
         "no_device_id": ckpt_verify.DistRun(after_wrap=fsdp_checkpoint_inside, options={"device_id": None})},
        baseline=plain, world_size=2, parallel="fsdp", parallel_options=fsdp_units(), noise_runs=1, out=str(out),
        expect={"no_device_id": "ERROR"})


@pytest.fixture(scope="module")
def fsdp2(tmp_path_factory):
    out = tmp_path_factory.mktemp("fsdp2") / "fsdp2.h5"
    return ckpt_verify.verify(
        Stack, batch_fn,
        {"checkpoint_then_shard": ckpt_verify.DistRun(prepare=fsdp2_checkpoint_then_shard),
         "shard_then_checkpoint": ckpt_verify.DistRun(wrap=fsdp2_shard_then_checkpoint),
         "shard_then_reentrant": ckpt_verify.DistRun(wrap=fsdp2_shard_then_reentrant)},
        baseline=plain, world_size=2, parallel="fsdp2", parallel_options={"units": fsdp2_blocks}, noise_runs=1,
        out=str(out))


def _rank_attrs(report, run, group):
    with h5py.File(report.path) as f:
        return [dict(f[f"runs/{run}/ranks/{r}/{group}"].attrs) for r in (0, 1)]


def test_fsdp_activation_checkpointing_passes_bitwise(fsdp):
    assert fsdp.ok, str(fsdp)
    assert fsdp["ac_inside_unit"] == "PASS"
    assert "bitwise identical to fsdp_baseline_0" in fsdp.verdicts["ac_inside_unit"].reason


def test_fsdp2_checkpoint_then_fully_shard_passes_bitwise(fsdp2):
    assert fsdp2.ok, str(fsdp2)
    assert fsdp2["checkpoint_then_shard"] == "PASS"


def test_sharded_runs_against_one_process_are_noise(fsdp, fsdp2):
    assert fsdp["ac_inside_unit_vs_single"] == "NOISE"
    assert fsdp2["checkpoint_then_shard_vs_single"] == "NOISE"


def test_each_rank_holds_half_of_each_gradient(fsdp, fsdp2):
    for report in (fsdp, fsdp2):
        with h5py.File(report.path) as f:
            run = f["runs/ac_inside_unit" if report is fsdp else "runs/checkpoint_then_shard"]
            full = run["steps/1/grads/blocks.0.fc.weight"]
            shards = [run[f"ranks/{r}/steps/1/grads/blocks.0.fc.weight"] for r in (0, 1)]
            assert sum(s.size for s in shards) == full.size == 64 * 64
            assert all(s.size < full.size for s in shards)


def test_each_rank_holds_fewer_bytes_at_the_end_of_forward_than_one_process(fsdp, fsdp2):
    with h5py.File(fsdp.path) as f:
        single = f["runs/baseline_0/memory"].attrs["end_forward_bytes"]
    for report, plain_run, run in ((fsdp, "fsdp_baseline_0", "ac_inside_unit"),
                                   (fsdp2, "fsdp2_baseline_0", "checkpoint_then_shard")):
        for sharded, checkpointed in zip(_rank_attrs(report, plain_run, "memory"), _rank_attrs(report, run, "memory")):
            assert checkpointed["end_forward_bytes"] < sharded["end_forward_bytes"] < single


def test_fsdp_reentrant_checkpoint_around_the_unit_gathers_each_unit_again(fsdp):
    plain_ranks = _rank_attrs(fsdp, "fsdp_baseline_0", "collectives")
    for base, planted in zip(plain_ranks, _rank_attrs(fsdp, "reentrant_around_unit", "collectives")):
        assert planted["backward_all_gathers"] == base["backward_all_gathers"] + 3
        assert planted["all_gather_bytes"] - base["all_gather_bytes"] == 3 * UNIT_BYTES


def test_nonreentrant_checkpoint_around_the_unit_gathers_nothing_more(fsdp, fsdp2):
    # torch guards it: FSDP's _pre_forward returns early in BACKWARD_PRE
    # (fsdp/_runtime_utils.py), FSDP2's in PRE_BACKWARD (_fully_shard/_fsdp_state.py)
    for report, plain_run, run in ((fsdp, "fsdp_baseline_0", "ac_around_unit"),
                                   (fsdp2, "fsdp2_baseline_0", "shard_then_checkpoint"),
                                   (fsdp2, "fsdp2_baseline_0", "shard_then_reentrant")):
        for base, other in zip(_rank_attrs(report, plain_run, "collectives"),
                               _rank_attrs(report, run, "collectives")):
            assert other == base, run


def test_the_figures_script_prints_one_row_per_rank(fsdp, capsys):
    import os
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "scripts"))
    import distributed_figures
    assert distributed_figures.main([fsdp.path]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()]
    planted = [r for r in rows if r and r[0] == "reentrant_around_unit"]
    assert [r[1] for r in planted] == ["0", "1"] and all(r[6] == "4/6" for r in planted)


def test_fsdp_on_a_cpu_only_host_needs_device_id_cpu(fsdp):
    # torch/distributed/fsdp/_init_utils.py, _init_device_handle: without a
    # device_id FSDP looks for an accelerator; the frontend passes cpu
    assert fsdp["no_device_id"] == "ERROR"
    assert ("FSDP needs a non-CPU accelerator device, but no accelerator device is detected"
            in fsdp.verdicts["no_device_id"].reason)


@pytest.mark.skipif(not torch.cuda.is_available(), reason=(
    "FSDP CPUOffload pins the CPU shard (torch/distributed/fsdp/_flat_param.py, init_flat_param_attributes: "
    "flat_param._local_shard.pin_memory()), which needs a CUDA driver: RuntimeError: Found no NVIDIA driver on "
    "your system"))
def test_fsdp_with_cpu_offload_passes(tmp_path):
    from torch.distributed.fsdp import CPUOffload
    report = ckpt_verify.verify(
        Stack, batch_fn, {"ac_inside_unit": ckpt_verify.DistRun(after_wrap=fsdp_checkpoint_inside)},
        baseline=plain, world_size=2, parallel="fsdp", noise_runs=1, out=str(tmp_path / "offload.h5"),
        parallel_options={**fsdp_units(), "cpu_offload": CPUOffload(offload_params=True)})
    assert report["ac_inside_unit"] == "PASS", str(report)


@pytest.mark.skipif(__import__("shutil").which("gnuplot") is None, reason="no gnuplot on this machine")
def test_the_figures_script_plots_bytes_per_rank(fsdp, tmp_path):
    import os
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "scripts"))
    import distributed_figures
    out = tmp_path / "per_rank.png"
    assert distributed_figures.main(["--plot", str(out), fsdp.path]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
