"""Small models shared by the torch-level cases, in plain torch style,
built from their sizes with random initialisation (nothing downloaded).

`Stack`: an input projection, `layers` pre-norm MLP blocks (LayerNorm,
Linear, GELU, Dropout, Linear, residual scaled by a keyword argument) and a
head. Its forward takes `region(block, x, **kwargs)`, the hook where a
checkpoint goes (plain call by default), so one model serves every
checkpoint flavour and its plain baseline."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

HIDDEN, SEQ, BATCH, LAYERS, DROPOUT = 32, 8, 4, 4, 0.1
MODEL = f"Stack: {LAYERS} pre-norm MLP blocks, hidden {HIDDEN}, dropout {DROPOUT}, batch {BATCH}x{SEQ}"


class Block(nn.Module):
    def __init__(self, hidden: int, dropout: float) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(hidden)
        self.fc1 = nn.Linear(hidden, 2 * hidden)
        self.fc2 = nn.Linear(2 * hidden, hidden)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, residual_scale: float = 1.0) -> torch.Tensor:
        return x * residual_scale + self.drop(self.fc2(F.gelu(self.fc1(self.norm(x)))))


def plain_region(block: nn.Module, x: torch.Tensor, **kwargs: Any) -> torch.Tensor:
    return block(x, **kwargs)


class Stack(nn.Module):
    def __init__(self, hidden: int = HIDDEN, layers: int = LAYERS, dropout: float = DROPOUT) -> None:
        super().__init__()
        self.inp = nn.Linear(hidden, hidden)
        self.blocks = nn.ModuleList(Block(hidden, dropout) for _ in range(layers))
        self.head = nn.Linear(hidden, hidden)

    def forward(self, x: torch.Tensor, region: Callable[..., torch.Tensor] = plain_region) -> torch.Tensor:
        x = self.inp(x)
        for block in self.blocks:
            x = region(block, x, residual_scale=0.5)
        return self.head(x)


def stack_fn() -> Stack:
    return Stack()


def stack_batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(BATCH, SEQ, HIDDEN), torch.randn(BATCH, SEQ, HIDDEN)


def plain_step(model: nn.Module, batch: Any) -> torch.Tensor:
    x, y = batch
    return F.mse_loss(model(x), y)


def region_step(region: Callable[..., torch.Tensor]) -> Callable[[nn.Module, Any], torch.Tensor]:
    """The plain step with `region` around each block."""
    def step(model: nn.Module, batch: Any) -> torch.Tensor:
        x, y = batch
        return F.mse_loss(model(x, region=region), y)
    return step


def wrap_blocks(wrap: Callable[[nn.Module], nn.Module]) -> Callable[[nn.Module], None]:
    """A prepare(model) that replaces each block by wrap(block), in place."""
    def prepare(model: nn.Module) -> None:
        for i, block in enumerate(model.blocks):
            model.blocks[i] = wrap(block)
    return prepare
