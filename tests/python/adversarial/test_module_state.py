"""Bug class: module state outside parameters and buffers. An EMA kept in
a plain tensor attribute (as fp8 amax/scale trackers and activation
monitors keep theirs) is updated again by a recompute that runs the
module's forward twice. Every module's tensor attributes are recorded per
step (steps/<k>/module_state/<module path>.<attr>, docs/schema.md) and
compared like buffers."""
import h5py
import pytest
import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

import ckpt_verify
from ckpt_verify import Run
from ckpt_verify.frontends.eager import module_state


class Tracked(torch.nn.Module):
    """A linear layer that keeps an EMA of its output's magnitude in a plain
    tensor attribute, updated on every forward."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)
        self.ema = torch.zeros(8)
        self.wrap = None

    def forward(self, x):
        y = self.wrap(self.fc, x) if self.wrap else self.fc(x)
        self.ema = 0.9 * self.ema + 0.1 * y.detach().abs().mean(0)
        return F.gelu(y)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.pre = torch.nn.Linear(8, 8)
        self.tracked = Tracked()
        self.head = torch.nn.Linear(8, 8)
        self.wrap = None

    def forward(self, x, y):
        h = self.pre(x)
        h = self.wrap(self.tracked, h) if self.wrap else self.tracked(h)
        return F.mse_loss(self.head(h), y)


def reentrant(fn, x):
    return checkpoint(fn, x, use_reentrant=True)


def whole_tracked_module(model):
    model.wrap = reentrant  # the recompute runs Tracked.forward again: a second EMA update


def its_linear_only(model):
    model.tracked.wrap = reentrant  # the EMA update stays outside the region


def batch_fn(step):
    return torch.randn(4, 8), torch.randn(4, 8)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("module_state") / "r.h5")
    return ckpt_verify.verify(Net, batch_fn, {"ema_twice": Run(prepare=whole_tracked_module),
                                              "ema_once": Run(prepare=its_linear_only)},
                              expect={"ema_twice": "FAIL"}, noise_runs=1, out=out)


def test_torch_reentrant_checkpoint_updating_an_ema_attribute_twice_fails_naming_it(report):
    assert report["ema_twice"] == "FAIL", str(report)
    assert "steps/1/module_state/tracked.ema" in report.verdicts["ema_twice"].first_divergence


def test_a_checkpoint_that_leaves_the_ema_update_outside_its_region_passes(report):
    assert report["ema_once"] == "PASS", str(report)


def test_the_module_state_is_recorded_per_step_under_module_path_and_attribute(report):
    with h5py.File(report.path, "r") as f:
        assert list(f["runs/baseline_0/steps/1/module_state"]) == ["tracked.ema"]
        assert f["runs/baseline_0/steps/2/module_state/tracked.ema"].shape == (8,)


def test_module_state_is_plain_tensor_attributes_only():
    """Parameters and buffers are recorded as such; tensors inside lists or
    dicts, tensor subclasses and meta tensors are not module state."""
    m = torch.nn.Linear(2, 2)
    m.register_buffer("count", torch.zeros(()))
    m.amax = torch.ones(2)
    m.history = [torch.ones(2)]
    m.lazy = torch.empty(2, device="meta")
    m.flag = torch.zeros(2, dtype=torch.complex64)  # no type in the schema
    assert [name for name, _ in module_state([("", m)])] == ["amax"]
    assert [name for name, _ in module_state([("blocks.0", m)])] == ["blocks.0.amax"]
