"""Models and checkpoints the adversarial modules share: a two-block net
with dropout whose blocks go through `self.wrap` when it is set, torch's
checkpoint with and without the RNG stash, and a user's own recompute
Function."""
import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint


class Block(torch.nn.Module):
    def __init__(self, dropout: float = 0.3):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)
        self.p = dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.dropout(F.gelu(self.fc(x)), self.p, training=self.training)


class Net(torch.nn.Module):
    """Two blocks and a head; a block runs as wrap(block, x) when
    wrap(model, block, x) says so (None: plainly)."""

    def __init__(self, dropout: float = 0.3):
        super().__init__()
        self.blocks = torch.nn.ModuleList([Block(dropout), Block(dropout)])
        self.head = torch.nn.Linear(8, 8)
        self.wrap = None

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = self.wrap(block, x) if self.wrap else block(x)
        return F.mse_loss(self.head(x), y)


def broken(fn, x):
    """Recomputes without the RNG stash: other dropout masks, wrong gradients."""
    return checkpoint(fn, x, use_reentrant=False, preserve_rng_state=False)


def good(fn, x):
    return checkpoint(fn, x, use_reentrant=False)


def batch_fn(step: int):
    return torch.randn(3, 8), torch.randn(3, 8)


def run_step(model, batch):
    return model(*batch)


def net_with(wrap, dropout: float = 0.3):
    """A model_fn whose model checkpoints through `wrap` (a hidden checkpoint)."""
    def model_fn():
        net = Net(dropout)
        net.wrap = wrap
        return net
    return model_fn
