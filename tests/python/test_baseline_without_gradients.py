"""pytest: a baseline in which parameters that require grad get no
gradient (a detached output, a reentrant checkpoint whose input needs no
grad) is flagged: the baseline's record carries a warning naming them,
and the judge shows it in the reason of every run judged against it,
a PASS included."""
import os
import sys

import h5py
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import ckpt_verify  # noqa: E402


class ThreeLayers(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l0, self.l1, self.l2 = (torch.nn.Linear(4, 4) for _ in range(3))

    def forward(self, x):
        return self.l2(self.l1(self.l0(x)))


def batch_fn(step):
    return torch.randn(2, 4)


def detaching_step(model, x):
    """Only the last layer trains: what feeds it is detached."""
    h = model.l1(model.l0(x)).detach()
    return F.mse_loss(model.l2(h), torch.zeros_like(h))


def whole_step(model, x):
    y = model(x)
    return F.mse_loss(y, torch.zeros_like(y))


def test_a_baseline_that_trains_few_parameters_is_named_in_the_verdict(tmp_path):
    out = str(tmp_path / "r.h5")
    control = ckpt_verify.Run(step=detaching_step, memory=None)  # plain: only the baseline is in question
    report = ckpt_verify.verify(ThreeLayers, batch_fn, {"same": control}, baseline=detaching_step, out=out)
    v = report.verdicts["same"]
    assert v.verdict == "PASS"
    assert "4 of 6 parameters that require grad got no gradient in baseline_0" in v.reason, v.reason
    assert "l0.weight, l0.bias, l1.weight, l1.bias" in v.reason
    assert "reentrant checkpoint whose input needs no grad" in v.reason
    with h5py.File(out, "r") as f:
        warning = f["runs/baseline_0"].attrs["warning"]
    assert "4 of 6" in (warning.decode() if isinstance(warning, bytes) else str(warning))


def test_a_baseline_that_trains_every_parameter_carries_no_warning(tmp_path):
    control = ckpt_verify.Run(step=whole_step, memory=None)
    report = ckpt_verify.verify(ThreeLayers, batch_fn, {"same": control}, baseline=whole_step,
                                out=str(tmp_path / "r.h5"))
    assert report.verdicts["same"].verdict == "PASS"
    assert "got no gradient" not in report.verdicts["same"].reason
