"""pytest: runs are isolated from each other (issue 42, item 5). Each run
trains on its own copy of the batches, with its own requires_grad flags;
the batches are checksummed (CRC-32) before and after each run, and a run
that changed them in place is an ERROR naming the batch and the tensor.
A baseline that changes its batch is refused before anything is judged.

Input gradients one-sided (issue 49, item 6): a run that computes an input
gradient its baseline does not (a step that sets requires_grad on its own
input, as enable_input_require_grads-style code does) is judged on what
both compute, the extra gradient named in its reason and in summary.json,
not a FAIL; one the baseline computes and the run does not stays a FAIL.

The runs are real (torch's checkpoint, the C judge)."""
import json
import os
import sys

import pytest
import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import ckpt_verify  # noqa: E402


class TwoBlocks(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.first = torch.nn.Linear(8, 8)
        self.second = torch.nn.Linear(8, 8)

    def forward(self, x, region=None):
        h = region(self.first, x) if region else self.first(x)
        return self.second(F.gelu(h))


def batch_fn(step):
    return torch.randn(4, 8), torch.randn(4, 8)


def plain(model, batch):
    x, y = batch
    return F.mse_loss(model(x), y)


def sets_requires_grad(model, batch):
    """A correct step that marks its input as requiring grad."""
    x, y = batch
    x.requires_grad_(True)
    return F.mse_loss(model(x), y)


def reentrant_first_block(model, batch):
    """torch's reentrant checkpoint around the first block, whose input
    needs no grad: the block's parameters get no gradient (FAIL), unless
    another run left requires_grad set on the shared input."""
    x, y = batch
    return F.mse_loss(model(x, region=lambda fn, t: checkpoint(fn, t, use_reentrant=True)), y)


def normalises_in_place(model, batch):
    x, y = batch
    x.sub_(x.mean()).div_(x.std())
    return F.mse_loss(model(x), y)


def nonreentrant(model, batch):
    x, y = batch
    return F.mse_loss(model(x, region=lambda fn, t: checkpoint(fn, t, use_reentrant=False)), y)


@pytest.fixture(scope="module")
def after_an_in_place_change(tmp_path_factory):
    out = tmp_path_factory.mktemp("isolation") / "in_place.h5"
    return ckpt_verify.verify(TwoBlocks, batch_fn, {"normalises": normalises_in_place, "correct": nonreentrant},
                              baseline=plain, out=str(out), expect={"normalises": "ERROR"}, noise_runs=1)


def test_a_run_that_sets_requires_grad_on_its_input_does_not_change_the_next_runs_verdict(tmp_path):
    report = ckpt_verify.verify(TwoBlocks, batch_fn,
                                {"sets_requires_grad": sets_requires_grad, "reentrant": reentrant_first_block},
                                baseline=plain, out=str(tmp_path / "r.h5"), noise_runs=1)
    assert report["reentrant"] == "FAIL", report.verdicts["reentrant"].reason


def test_a_run_that_changes_its_batch_in_place_is_named_in_its_error(after_an_in_place_change):
    v = after_an_in_place_change.verdicts["normalises"]
    assert v.verdict == "ERROR"
    assert v.reason.startswith("run normalises changed batch 1 in place (inputs/1/0)"), v.reason


def test_a_correct_run_after_one_that_changed_its_batch_still_passes(after_an_in_place_change):
    assert after_an_in_place_change["correct"] == "PASS", after_an_in_place_change.verdicts["correct"].reason
    assert after_an_in_place_change


def test_a_baseline_that_changes_its_batch_is_refused_and_writes_nothing(tmp_path):
    out = tmp_path / "r.h5"
    with pytest.raises(ckpt_verify.BadInput, match=r"baseline changes its batch: run baseline_0 changed batch 1 "
                                                   r"in place \(inputs/1/0\)"):
        ckpt_verify.verify(TwoBlocks, batch_fn, {"correct": nonreentrant}, baseline=normalises_in_place, out=str(out))
    assert os.listdir(tmp_path) == []


def test_the_batches_in_the_report_are_the_ones_batch_fn_made(after_an_in_place_change):
    import h5py
    with h5py.File(after_an_in_place_change.path, "r") as f:
        x = f["inputs/1/0"][()]
    torch.manual_seed(0)
    assert torch.equal(torch.from_numpy(x), batch_fn(1)[0])


def requires_input_grad(model, batch):
    """A correct checkpoint whose step marks its input as requiring grad."""
    x, y = batch
    x.requires_grad_(True)
    return nonreentrant(model, (x, y))


def summary_records(report):
    with open(os.path.join(report.judge_dir, "summary.json")) as f:
        return {r["impl"]: r for r in json.load(f)["records"]}


@pytest.fixture(scope="module")
def one_sided(tmp_path_factory):
    out = tmp_path_factory.mktemp("one_sided") / "r.h5"
    return ckpt_verify.verify(TwoBlocks, batch_fn, {"extra_input_grad": requires_input_grad}, baseline=plain,
                              out=str(out), noise_runs=1)


def test_an_input_gradient_only_the_run_computes_is_not_a_fail(one_sided):
    v = one_sided.verdicts["extra_input_grad"]
    assert v.verdict == "PASS", v.reason
    assert v.reason.startswith("bitwise identical to baseline_0"), v.reason


def test_an_input_gradient_only_the_run_computes_is_named_in_its_reason(one_sided):
    reason = one_sided.verdicts["extra_input_grad"].reason
    assert ("[input gradient computed by extra_input_grad only, not by baseline_0, so not compared: "
            "steps/1/input_grads/0") in reason, reason


def test_an_input_gradient_only_the_run_computes_is_in_summary_json(one_sided):
    rec = summary_records(one_sided)["extra_input_grad"]
    assert rec["input_grads_only_in_run"] >= 1
    assert rec["first_input_grad_only_in_run"] == "steps/1/input_grads/0"


def stage_batches(step):
    """An input that requires grad, as a pipeline stage's input does."""
    return torch.randn(4, 8, requires_grad=True), torch.randn(4, 8)


def detaches_input(model, batch):
    x, y = batch
    return plain(model, (x.detach(), y))


def test_an_input_gradient_the_baseline_computes_and_the_run_does_not_stays_a_fail(tmp_path):
    report = ckpt_verify.verify(TwoBlocks, stage_batches, {"detaches": detaches_input}, baseline=plain,
                                out=str(tmp_path / "r.h5"), noise_runs=1, expect={"detaches": "FAIL"})
    v = report.verdicts["detaches"]
    assert v.verdict == "FAIL", v.reason
    assert "steps/1/input_grads/0 is recorded by baseline_0 but not by detaches" in v.reason, v.reason
    assert "input_grads_only_in_run" not in summary_records(report)["detaches"]
