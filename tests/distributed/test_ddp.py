"""DDP over two gloo ranks: a checkpoint that DDP can run is bitwise the
plain DDP run and NOISE against one process; the reentrant checkpoint of a
parameter used in two regions is DDP's own error, with or without
find_unused_parameters; with static_graph=True DDP runs it and its
gradients are bitwise right, but the shared parameter's gradient hook
fires twice on each rank where the plain DDP run's fires once: FAIL, as
for one process (the hook count is judged per rank)."""
import h5py
import pytest
from models import Shared, batch_fn, nonreentrant, plain, reentrant

import ckpt_verify

DDP_MESSAGE = "Expected to mark a variable ready only once"


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("ddp") / "ddp.h5"
    return ckpt_verify.verify(
        Shared, batch_fn,
        {"nonreentrant": nonreentrant,
         "reentrant": reentrant,
         "reentrant_unused": ckpt_verify.DistRun(step=reentrant, options={"find_unused_parameters": True}),
         "reentrant_static": ckpt_verify.DistRun(step=reentrant, options={"static_graph": True})},
        baseline=plain, world_size=2, parallel="ddp", noise_runs=1, out=str(out),
        expect={"reentrant": "ERROR", "reentrant_unused": "ERROR", "reentrant_static": "FAIL"})


def test_every_verdict_is_the_expected_one(report):
    assert report.ok, str(report)


def test_nonreentrant_is_bitwise_the_plain_ddp_run(report):
    assert report["nonreentrant"] == "PASS"
    assert "bitwise identical to ddp_baseline_0" in report.verdicts["nonreentrant"].reason


def test_against_one_process_only_noise_can_be_claimed(report):
    assert report["nonreentrant_vs_single"] == "NOISE"
    assert "over 4 baselines" in report.verdicts["nonreentrant_vs_single"].reason


def test_the_twins_noise_says_what_it_compares_not_kernels(report):
    reason = report.verdicts["nonreentrant_vs_single"].reason
    assert reason.startswith("this run's gradients (2 DDP ranks) vs a single-process run of the same model: what "
                             "distribution does to the numbers (reduction order, loss scaling), not the checkpoint; "
                             "every tensor within 16x its own spread"), reason
    assert "kernel non-determinism" not in reason


def test_the_single_process_envelope_is_one_process_and_plain_ddp(report):
    with h5py.File(report.path) as f:
        family = [f[f"runs/ddp_or_single_baseline_{k}"].attrs["linked_from"].decode() for k in range(4)]
        assert family == ["baseline_0", "baseline_1", "ddp_baseline_0", "ddp_baseline_1"]
        assert "ranks" not in f["runs/nonreentrant_vs_single"]
        assert f["runs/nonreentrant_vs_single"].attrs["baselines"].decode() == "ddp_or_single_baseline"


def test_reentrant_with_a_parameter_in_two_regions_is_ddps_error(report):
    assert report["reentrant"] == "ERROR"
    reason = report.verdicts["reentrant"].reason
    # Both ranks raise DDP's error; the one that raised first is named first.
    assert DDP_MESSAGE in reason and reason.startswith(("rank 0: ", "rank 1: "))


def test_find_unused_parameters_gives_the_same_ddp_error(report):
    assert report["reentrant_unused"] == "ERROR"
    assert DDP_MESSAGE in report.verdicts["reentrant_unused"].reason


def test_static_graph_runs_the_reentrant_checkpoint_but_its_hook_fires_twice(report):
    v = report.verdicts["reentrant_static"]
    assert v.verdict == "FAIL" and v.expected
    assert v.reason.startswith("gradients bitwise identical to ddp_baseline_0, but the gradient hook of parameter "
                               "shared.bias fired 2 time(s) on rank 0 in backward call 1 of step 1 (1 call(s) per "
                               "step), where ddp_baseline_0's fired 1 on rank 0: what hangs on it runs more often "
                               "than in the plain step"), v.reason
    assert v.first_divergence.startswith("ranks/0/checks/hook_fires/shared.bias [0, 0] = 2 (ddp_baseline_0: 1)")


def test_a_hook_fail_keeps_its_memory_and_time_figures(report):
    record = report.verdicts["reentrant_static"].record
    assert record["peak_bytes"] > 0 and record["step_ms"] > 0, record


def test_each_rank_counts_its_hooks_against_the_same_rank_of_plain_ddp(report):
    with h5py.File(report.path) as f:
        for run in ("ddp_baseline_0", "nonreentrant", "reentrant_static"):
            for rank in (0, 1):
                fires = f[f"runs/{run}/ranks/{rank}/checks/hook_fires/shared.weight"][()]
                assert fires.tolist() == ([[2], [2]] if run == "reentrant_static" else [[1], [1]]), (run, rank)
        assert "checks" not in f["runs/nonreentrant_vs_single"]  # a twin's family mixes one process and ranks


def test_a_twin_of_a_run_failed_by_its_hook_count_is_still_judged(report):
    # its gradients are the right ones: the comparison with one process holds
    assert report["reentrant_static_vs_single"] == "NOISE"
    assert report.verdicts["reentrant_static_vs_single"].expected


def test_each_rank_records_its_own_gradients_loss_and_figures(report):
    with h5py.File(report.path) as f:
        run = f["runs/nonreentrant"]
        assert run.attrs["world_size"] == 2
        for rank in (0, 1):
            g = run[f"ranks/{rank}"]
            assert g["steps/1/grads/shared.weight"].shape == (64, 64)
            assert g["steps/1/loss"].shape == ()
            assert g["memory"].attrs["end_forward_bytes"] > 0
            assert g["timing"].attrs["step_ms"] > 0
        # DDP averages: every rank holds the global gradient
        assert (run["ranks/1/steps/1/grads/shared.weight"][()] == run["steps/1/grads/shared.weight"][()]).all()
        # each rank's loss is over its own half of the batch
        assert run["ranks/0/steps/1/loss"][()] != run["ranks/1/steps/1/loss"][()]


def test_one_rank_is_bitwise_one_process(tmp_path):
    # nothing to split or reduce: the frontend itself (seeding, batch
    # slicing, the mean loss, DDP's averaging by 1) adds no difference
    from models import Stack
    report = ckpt_verify.verify(Stack, batch_fn, {"nonreentrant": nonreentrant}, baseline=plain, world_size=1,
                                noise_runs=0, out=str(tmp_path / "one.h5"))
    assert report["nonreentrant_vs_single"] == "PASS", str(report)
    assert "bitwise identical to ddp_or_single_baseline_0" in report.verdicts["nonreentrant_vs_single"].reason
