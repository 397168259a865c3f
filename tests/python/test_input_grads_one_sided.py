"""pytest: input gradients one-sided (issue 49, item 6). A run that
computes an input gradient its baseline does not (a plain step that sets
requires_grad on its own input, as enable_input_require_grads-style code
does) computes nothing differently: it is judged on what both compute,
and the extra gradient is named in its reason and in summary.json, not a
FAIL. An input gradient the baseline computes and the run does not stays
a FAIL.

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


def requires_input_grad(model, batch):
    """A correct checkpoint whose step marks its input as requiring grad."""
    x, y = batch
    x.requires_grad_(True)
    return F.mse_loss(model(x, region=lambda fn, t: checkpoint(fn, t, use_reentrant=False)), y)


def records(report):
    with open(os.path.join(report.judge_dir, "summary.json")) as f:
        return {r["impl"]: r for r in json.load(f)["records"]}


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("one_sided") / "r.h5"
    return ckpt_verify.verify(TwoBlocks, batch_fn, {"extra_input_grad": requires_input_grad}, baseline=plain,
                              out=str(out), noise_runs=1)


def test_an_input_gradient_only_the_run_computes_is_not_a_fail(report):
    v = report.verdicts["extra_input_grad"]
    assert v.verdict == "PASS", v.reason
    assert v.reason.startswith("bitwise identical to baseline_0"), v.reason


def test_an_input_gradient_only_the_run_computes_is_named_in_its_reason(report):
    reason = report.verdicts["extra_input_grad"].reason
    assert ("[input gradient computed by extra_input_grad only, not by baseline_0, so not compared: "
            "steps/1/input_grads/0") in reason, reason


def test_an_input_gradient_only_the_run_computes_is_in_summary_json(report):
    rec = records(report)["extra_input_grad"]
    assert rec["input_grads_only_in_run"] >= 1
    assert rec["first_input_grad_only_in_run"] == "steps/1/input_grads/0"


def stage_batches(step):
    """An input that requires grad, as a pipeline stage's input does."""
    return torch.randn(4, 8, requires_grad=True), torch.randn(4, 8)


def detaches_input(model, batch):
    x, y = batch
    return F.mse_loss(model(x.detach()), y)


def test_an_input_gradient_the_baseline_computes_and_the_run_does_not_stays_a_fail(tmp_path):
    report = ckpt_verify.verify(TwoBlocks, stage_batches, {"detaches": detaches_input}, baseline=plain,
                                out=str(tmp_path / "r.h5"), noise_runs=1, expect={"detaches": "FAIL"})
    v = report.verdicts["detaches"]
    assert v.verdict == "FAIL", v.reason
    assert "steps/1/input_grads/0 is recorded by baseline_0 but not by detaches" in v.reason, v.reason
    assert "input_grads_only_in_run" not in records(report)["detaches"]
