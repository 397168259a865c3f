"""The README's first example, as written there ("Verify your own
checkpoint (Python)"): a 4-block pre-norm MLP with dropout, verified with
torch's non-reentrant checkpoint around each block (PASS) and the same
checkpoint without its RNG replay (a planted bug: FAIL, declared).
python.readme_quickstart_passes checks that README and this file agree
and that it runs as written.

    scripts/python python/examples/quickstart.py"""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

import ckpt_verify


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln, self.up, self.down = nn.LayerNorm(64), nn.Linear(64, 256), nn.Linear(256, 64)

    def forward(self, x):
        return x + self.down(F.dropout(F.gelu(self.up(self.ln(x))), 0.1))


def model_fn():                  # a fresh model; verify() seeds before each call
    return nn.Sequential(*[Block() for _ in range(4)])


def batch_fn(step):              # the batch of step 1, 2, ...
    return torch.randn(8, 32, 64), torch.randn(8, 32, 64)


def plain(model, batch):         # the baseline: no checkpoint; returns the scalar loss
    x, y = batch
    return F.mse_loss(model(x), y)


def mine(model, batch):          # your checkpoint: each block recomputed in backward
    x, y = batch
    for block in model:
        x = checkpoint(block, x, use_reentrant=False)
    return F.mse_loss(x, y)


def no_rng(model, batch):        # a planted bug: the recompute draws other dropout masks
    x, y = batch
    for block in model:
        x = checkpoint(block, x, use_reentrant=False, preserve_rng_state=False)
    return F.mse_loss(x, y)


report = ckpt_verify.verify(model_fn, batch_fn, {"mine": mine, "no_rng": no_rng}, baseline=plain,
                            expect={"no_rng": "FAIL"}, out="reports/mine.h5")
print(report.table)
assert report                    # every verdict the expected one: mine PASS, no_rng FAIL
