"""pytest: a checkpoint applied to the model (as Hugging Face, FSDP and
fairscale apply it) is verified as a run, never as the baseline.

A broken checkpoint applied inside model_fn used to check itself: the
baseline was built by the same model_fn, so it recomputed with the same
bug and the run got PASS, "bitwise identical". The baseline is now proven
plain by what it does (frontends/probe.py), and Run(prepare=...) applies
the checkpoint to the run's model only. The models are real torch modules,
the checkpoints torch.utils.checkpoint and a hand-written
autograd.Function, the judge the C binary."""
import os
import sys

import pytest
import torch
import torch.nn.functional as F
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import apply_activation_checkpointing
from torch.utils.checkpoint import checkpoint

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import ckpt_verify  # noqa: E402
from ckpt_verify import CheckpointInBaseline, Run  # noqa: E402


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x):
        return F.dropout(F.gelu(self.fc(x)), 0.3, training=self.training)


class Net(torch.nn.Module):
    """Blocks that checkpoint themselves when .ckpt is set: the shape of
    Hugging Face's gradient_checkpointing_enable()."""

    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList([Block(), Block()])
        self.head = torch.nn.Linear(8, 8)
        self.ckpt = None

    def forward(self, x, y):
        for block in self.blocks:
            x = self.ckpt(block, x) if self.ckpt else block(x)
        return F.mse_loss(self.head(x), y)


def broken(fn, x):
    """A checkpoint that recomputes without the RNG state: other dropout masks."""
    return checkpoint(fn, x, use_reentrant=False, preserve_rng_state=False)


def good(fn, x):
    return checkpoint(fn, x, use_reentrant=False)


class Recompute(torch.autograd.Function):
    """A user's own checkpoint under a name that says nothing: the forward
    keeps only the input and runs the block again in backward. The block's
    parameters are inputs, so that their gradients flow through it."""

    @staticmethod
    def forward(ctx, x, block, *params):
        ctx.block = block
        ctx.save_for_backward(x, *params)
        with torch.no_grad():
            return block(x)

    @staticmethod
    def backward(ctx, grad):
        x, *params = ctx.saved_tensors
        x = x.detach().requires_grad_(True)
        with torch.enable_grad():
            out = ctx.block(x)
        grads = torch.autograd.grad(out, [x, *params], grad)
        return (grads[0], None, *grads[1:])


def own_function(fn, x):
    return Recompute.apply(x, fn, *fn.parameters())


def batch_fn(step):
    return torch.randn(3, 8), torch.randn(3, 8)


def checkpointed_by(wrap):
    def model_fn():
        net = Net()
        net.ckpt = wrap
        return net
    return model_fn


def enable(wrap):
    def prepare(model):
        model.ckpt = wrap
    return prepare


def run_step(model, batch):
    return model(*batch)


@pytest.mark.parametrize("wrap", [broken, good, own_function],
                         ids=["broken_checkpoint", "torch_checkpoint", "own_autograd_function"])
def test_a_model_fn_that_checkpoints_is_refused_naming_what_was_seen(wrap, tmp_path):
    with pytest.raises(CheckpointInBaseline, match="the baseline checkpoints: .*Run\\(prepare="):
        ckpt_verify.verify(checkpointed_by(wrap), batch_fn, {"mine": run_step}, out=str(tmp_path / "r.h5"))
    assert not os.path.exists(tmp_path / "r.h5"), "nothing is written for a refused baseline"


def test_the_broken_checkpoint_given_as_a_run_fails(tmp_path):
    report = ckpt_verify.verify(checkpointed_by(None), batch_fn, {"broken": Run(prepare=enable(broken))},
                                out=str(tmp_path / "r.h5"))
    assert report["broken"] == "FAIL"
    assert not report


def test_a_correct_checkpoint_given_as_a_run_passes(tmp_path):
    report = ckpt_verify.verify(checkpointed_by(None), batch_fn, {"good": Run(prepare=enable(good))},
                                out=str(tmp_path / "r.h5"))
    assert report["good"] == "PASS", str(report)


def test_a_wrapper_that_renames_parameters_is_compared_by_the_plain_names(tmp_path):
    """apply_activation_checkpointing wraps each block in a CheckpointWrapper,
    whose parameters are named blocks.0._checkpoint_wrapped_module.fc.weight."""
    def wrap_blocks(model):
        apply_activation_checkpointing(model, check_fn=lambda m: isinstance(m, Block))
        assert any("_checkpoint_wrapped_module" in n for n, _ in model.named_parameters())
    report = ckpt_verify.verify(checkpointed_by(None), batch_fn, {"fsdp_style": Run(prepare=wrap_blocks)},
                                out=str(tmp_path / "r.h5"))
    assert report["fsdp_style"] == "PASS", str(report)


def test_a_prepare_that_replaces_parameters_is_refused(tmp_path):
    def rebuild(model):
        return Net()
    with pytest.raises(ckpt_verify.BadInput, match="no longer trains parameter 'blocks.0.fc.weight'"):
        ckpt_verify.verify(checkpointed_by(None), batch_fn, {"x": Run(prepare=rebuild)}, out=str(tmp_path / "r.h5"))


def test_run_needs_prepare_or_step():
    with pytest.raises(ckpt_verify.BadInput, match="needs prepare=, step= or both"):
        Run()
