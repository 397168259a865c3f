"""Bug class: a region input's lost gradient. A pipeline stage's input is
the previous stage's activation: it requires grad, and its gradient is
what the stage sends back. A checkpoint that detaches it returns None to
the previous stage while every parameter gradient of this stage is right.
The gradient of every batch tensor that requires grad is recorded per
step (steps/<k>/input_grads/<leaf>, docs/schema.md) and compared like a
parameter's."""
import h5py
import pytest
import torch
from adversarial_models import Net

import ckpt_verify
from ckpt_verify import Run


class Recompute(torch.autograd.Function):
    """A hand-written checkpoint: keeps the block's input, runs the block
    again in backward under the RNG state of forward. keep_input=False
    drops the input's gradient (returns None for it), as a checkpoint
    that detaches its input does."""

    @staticmethod
    def forward(ctx, x, block, keep_input, *params):
        ctx.block, ctx.keep_input = block, keep_input
        ctx.rng_state = torch.get_rng_state()
        ctx.save_for_backward(x, *params)
        with torch.no_grad():
            return block(x)

    @staticmethod
    def backward(ctx, grad):
        x, *params = ctx.saved_tensors
        with torch.random.fork_rng(devices=[]), torch.enable_grad():
            torch.set_rng_state(ctx.rng_state)
            # Detached copies of the parameters: the inner grad fires none
            # of their hooks, which fire once, as the engine passes them.
            xd = x.detach().requires_grad_(True)
            copies = {n: p.detach().requires_grad_(True) for (n, _), p in zip(ctx.block.named_parameters(), params)}
            y = torch.func.functional_call(ctx.block, copies, (xd,))
            grads = torch.autograd.grad(y, [xd, *copies.values()], grad)
        return (grads[0] if ctx.keep_input else None, None, None, *grads[1:])


def stage_batches(step):
    """The stage's input activation (requires grad, as the previous stage's
    output does) and its target."""
    return torch.randn(3, 8, requires_grad=True), torch.randn(3, 8)


def checkpointing(keep_input):
    def prepare(model):
        model.wrap = lambda block, x: Recompute.apply(x, block, keep_input, *block.parameters())
    return prepare


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("input_grads") / "r.h5")
    return ckpt_verify.verify(Net, stage_batches, {"detaches_input": Run(prepare=checkpointing(False)),
                                                  "keeps_input": Run(prepare=checkpointing(True))},
                              expect={"detaches_input": "FAIL"}, noise_runs=1, out=out)


def test_a_checkpoint_that_detaches_the_stage_input_fails_naming_its_input_gradient(report):
    assert report["detaches_input"] == "FAIL", str(report)
    assert "steps/1/input_grads/0" in report.verdicts["detaches_input"].reason


def test_a_checkpoint_that_keeps_the_input_gradient_passes(report):
    assert report["keeps_input"] == "PASS", str(report)


def test_the_gradient_of_each_batch_tensor_that_requires_grad_is_recorded_under_its_leaf_name(report):
    with h5py.File(report.path, "r") as f:
        base = f["runs/baseline_0"]
        for k in (1, 2):
            assert list(base[f"steps/{k}/input_grads"]) == ["0"]  # the target requires no grad
            assert base[f"steps/{k}/input_grads/0"].shape == (3, 8)
