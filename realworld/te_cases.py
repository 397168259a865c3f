"""TransformerEngine's te.distributed.checkpoint (reentrant and not) over
te.LayerNormMLP blocks (bias + GELU) and a te.Linear head, at batch 4 and
at batch size 1, the shape where the fused bias-GELU takes its own path.
TransformerEngine needs a CUDA device: without one every run is Skipped
with the reason; scripts/gpu-build.sh runs them where there is one (and
they are Skipped there too, saying so, when its Python has no
transformer_engine)."""
from __future__ import annotations

import importlib.util

import torch
import torch.nn.functional as F
from torch import nn

from .case import Case, RunSpec

PKG = "transformer-engine"
HIDDEN, FFN, SEQ, LAYERS = 64, 128, 16, 2


def _skip() -> str | None:
    if not torch.cuda.is_available():
        return "needs a CUDA device: TransformerEngine's modules run only on NVIDIA GPUs, and this torch sees none"
    if importlib.util.find_spec("transformer_engine") is None:
        return "transformer_engine is not installed in this Python (a CUDA build of it is needed)"
    return None


class TEStack(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        import transformer_engine.pytorch as te
        self.blocks = nn.ModuleList(te.LayerNormMLP(HIDDEN, FFN, bias=True, activation="gelu")
                                    for _ in range(LAYERS))
        self.drop = nn.Dropout(0.1)
        self.head = te.Linear(HIDDEN, HIDDEN, bias=True)

    def forward(self, x: torch.Tensor, ckpt=None) -> torch.Tensor:
        for block in self.blocks:
            x = x + self.drop(ckpt(block, x) if ckpt else block(x))
        return self.head(x)


def _batch(batch: int):
    def make(step: int):
        return torch.randn(SEQ, batch, HIDDEN), torch.randn(SEQ, batch, HIDDEN)
    return make


def _plain(model, batch):
    x, y = batch
    return F.mse_loss(model(x), y)


def _te_step(reentrant: bool):
    def step(model, batch):
        import transformer_engine.pytorch as te
        x, y = batch

        def ckpt(block, h):
            return te.distributed.checkpoint(block, h, use_reentrant=reentrant)
        return F.mse_loss(model(x, ckpt=ckpt), y)
    return step


def cases() -> list[Case]:
    skip = _skip()
    ok = "te.distributed.checkpoint replays the RNG and TE's own state: bitwise as the plain step"
    out = []
    for batch in (4, 1):
        model = f"TEStack: {LAYERS} te.LayerNormMLP (bias+GELU), te.Linear head, hidden {HIDDEN}, batch {batch}"
        out.append(Case(name=f"te_checkpoint_bs{batch}", framework="transformer_engine", package=PKG, model=model,
                        model_fn=TEStack, batch_fn=_batch(batch), baseline=_plain, device="cuda", skip=skip, runs=[
            RunSpec(f"te_reentrant_bs{batch}", "te.distributed.checkpoint(use_reentrant=True)", ok,
                    step=_te_step(True)),
            RunSpec(f"te_nonreentrant_bs{batch}", "te.distributed.checkpoint(use_reentrant=False)", ok,
                    step=_te_step(False)),
        ]))
    return out
