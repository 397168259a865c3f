"""docs/compile.md's walkthrough: a non-reentrant checkpoint under torch.compile,
judged against the compiled plain model (the `compiled` family) and, as
mine_vs_eager, against the eager one; exits 1 unless every verdict is the
expected one. Run: scripts/python python/examples/compile_checkpoint.py"""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

import ckpt_verify
from ckpt_verify import compile_evidence

B = compile_evidence.backend("aot_eager")   # or "inductor"; one object: Dynamo guards on it


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln, self.up, self.down = nn.LayerNorm(64), nn.Linear(64, 256), nn.Linear(256, 64)

    def forward(self, x):
        return x + self.down(F.gelu(self.up(self.ln(x))))


class Net(nn.Module):                       # model(x, y) is the loss
    def __init__(self, ckpt=False):
        super().__init__()
        self.blocks, self.ckpt = nn.ModuleList(Block() for _ in range(4)), ckpt

    def forward(self, x, y):
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=False) if self.ckpt else block(x)
        return F.mse_loss(x, y)


def plain_compiled(model):
    return torch.compile(model, backend=B)


def mine(model):                            # your checkpoint, then compiled
    model.ckpt = True
    return torch.compile(model, backend=B)


report = ckpt_verify.verify(
    Net, lambda step: (torch.randn(8, 32, 64), torch.randn(8, 32, 64)),
    {"mine": ckpt_verify.Run(prepare=mine, against="compiled")},
    baselines={"compiled": ckpt_verify.Run(prepare=plain_compiled)},
    out="mine.h5")
print(report)
raise SystemExit(0 if report.ok else 1)
