"""Bug class: a fused Linear+dropout Function that keeps no mask and draws
it again in backward. Without restoring the RNG the mask differs from
forward's (wrong gradients); with it, the values are right but the
baseline still draws in backward (a recompute of the mask). A plain
backward draws no random numbers: the probe counts random ops run during
backward, and compares the generators' states before and after it."""
import pytest
import torch
import torch.nn.functional as F
from adversarial_models import batch_fn, run_step

import ckpt_verify
from ckpt_verify import CheckpointInBaseline


class FusedLinearDropout(torch.autograd.Function):
    """y = dropout(x @ w.T + b); the mask is drawn again in backward, from
    the generator as backward finds it (restore=False) or from the state
    forward drew it from (restore=True, under fork_rng)."""

    @staticmethod
    def forward(ctx, x, w, b, p, restore):
        ctx.p, ctx.restore = p, restore
        ctx.rng_state = torch.get_rng_state()
        ctx.save_for_backward(x, w)
        y = F.linear(x, w, b)
        return y * (torch.rand_like(y) >= p) / (1 - p)

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        with torch.random.fork_rng(devices=[], enabled=ctx.restore):
            if ctx.restore:
                torch.set_rng_state(ctx.rng_state)
            mask = (torch.rand_like(grad) >= ctx.p) / (1 - ctx.p)
        g = grad * mask
        return g @ w, g.t() @ x, g.sum(0), None, None


class FusedNet(torch.nn.Module):
    def __init__(self, restore):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)
        self.head = torch.nn.Linear(8, 8)
        self.restore = restore

    def forward(self, x, y):
        h = FusedLinearDropout.apply(x, self.fc.weight, self.fc.bias, 0.3, self.restore)
        return F.mse_loss(self.head(h), y)


def test_a_fused_function_that_redraws_its_mask_without_restoring_is_refused(tmp_path):
    redrawn = "random op\\(s\\) ran during its backward, first aten.rand_like"
    with pytest.raises(CheckpointInBaseline, match=redrawn) as e:
        ckpt_verify.verify(lambda: FusedNet(restore=False), batch_fn, {"mine": run_step}, out=str(tmp_path / "r.h5"))
    assert "the state of the CPU generator changed" in str(e.value)


def test_a_fused_function_that_redraws_under_the_restored_rng_is_refused_for_its_random_ops_alone(tmp_path):
    with pytest.raises(CheckpointInBaseline, match="random op\\(s\\) ran during its backward") as e:
        ckpt_verify.verify(lambda: FusedNet(restore=True), batch_fn, {"mine": run_step}, out=str(tmp_path / "r.h5"))
    assert "state of" not in str(e.value) and "grad enabled" not in str(e.value)
    assert "saved-tensor hooks" not in str(e.value)
