"""The probe's detectors specified one at a time, in both directions: each
finding alone refuses a baseline (saved-tensor hooks without any
recompute; a recompute without hooks or random ops; a draw from Python's
or numpy's generator in backward), and a plain baseline that draws its
dropout in forward is not refused. (A random op alone and a generator
state alone: test_fused_dropout_redraw.py, test_recompute_on_worker_thread.py.)"""
import random

import numpy as np
import pytest
import torch
from adversarial_models import Net, batch_fn, good, net_with, run_step
from torch.utils.checkpoint import checkpoint

import ckpt_verify
from ckpt_verify import CheckpointInBaseline, Run

OTHER_FINDINGS = ("grad enabled", "saved-tensor hooks", "random op", "state of")


def _only(message: str, finding: str) -> None:
    assert finding in message, message
    others = [f for f in OTHER_FINDINGS if f != finding and f in message]
    assert not others, f"{others} besides {finding!r}: {message}"


class OffloadedNet(Net):
    """Keeps every saved tensor, on the CPU, through save_on_cpu's hooks:
    nothing is recomputed."""

    def forward(self, x, y):
        with torch.autograd.graph.save_on_cpu():
            return super().forward(x, y)


def test_saved_tensor_hooks_without_a_recompute_are_refused_for_the_hooks_alone(tmp_path):
    with pytest.raises(CheckpointInBaseline) as e:
        ckpt_verify.verify(OffloadedNet, batch_fn, {"mine": run_step}, out=str(tmp_path / "r.h5"))
    _only(str(e.value), "saved-tensor hooks")


def reentrant(fn, x):
    """torch's reentrant checkpoint on the regions whose input requires grad
    (the second block): on the first, whose input is the batch, it would
    have no gradient to recompute for."""
    return checkpoint(fn, x, use_reentrant=True) if x.requires_grad else fn(x)


def test_a_recompute_without_hooks_or_random_ops_is_refused_for_the_recompute_alone(tmp_path):
    """torch's reentrant checkpoint sets no saved-tensor hooks; without
    dropout its recompute draws nothing."""
    with pytest.raises(CheckpointInBaseline) as e:
        ckpt_verify.verify(net_with(reentrant, dropout=0.0), batch_fn, {"mine": run_step},
                           out=str(tmp_path / "r.h5"))
    _only(str(e.value), "grad enabled")


@pytest.mark.parametrize("draw, name", [(random.random, "Python's random"),
                                        (np.random.random, "numpy's global generator")],
                         ids=["python_random", "numpy"])
def test_a_backward_that_draws_from_another_generator_is_refused_naming_it(draw, name, tmp_path):
    class Jittered(Net):
        def forward(self, x, y):
            h = self.blocks[0](x)
            h.register_hook(lambda g: g * (1.0 + 0.0 * draw()))  # a draw in backward
            return torch.nn.functional.mse_loss(self.head(self.blocks[1](h)), y)

    with pytest.raises(CheckpointInBaseline, match=f"the state of {name} changed during its backward") as e:
        ckpt_verify.verify(Jittered, batch_fn, {"mine": run_step}, out=str(tmp_path / "r.h5"))
    _only(str(e.value), "state of")


def checkpointed_by(wrap):
    def prepare(model):
        model.wrap = wrap
    return prepare


def test_a_plain_baseline_that_draws_its_dropout_in_forward_is_not_refused(tmp_path):
    report = ckpt_verify.verify(Net, batch_fn, {"good": Run(prepare=checkpointed_by(good))}, out=str(tmp_path / "r.h5"))
    assert report["good"] == "PASS", str(report)
