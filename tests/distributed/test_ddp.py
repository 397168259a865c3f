"""DDP over two gloo ranks: a checkpoint that DDP can run is bitwise the
plain DDP run and NOISE against one process; the reentrant checkpoint of a
parameter used in two regions is DDP's own error, with or without
find_unused_parameters, and passes with static_graph=True."""
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
        expect={"reentrant": "ERROR", "reentrant_unused": "ERROR"})


def test_every_verdict_is_the_expected_one(report):
    assert report.ok, str(report)


def test_nonreentrant_is_bitwise_the_plain_ddp_run(report):
    assert report["nonreentrant"] == "PASS"
    assert "bitwise identical to ddp_baseline_0" in report.verdicts["nonreentrant"].reason


def test_against_one_process_only_noise_can_be_claimed(report):
    assert report["nonreentrant_vs_single"] == "NOISE"
    assert "over 4 baselines" in report.verdicts["nonreentrant_vs_single"].reason


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


def test_static_graph_lets_the_reentrant_checkpoint_pass(report):
    assert report["reentrant_static"] == "PASS"


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
