"""The model the examples verify: none of the harness's built-ins. A stack
of torch.nn.TransformerEncoderLayer (self-attention and feed-forward, with
dropout) between an input projection and an output head with a BatchNorm
(whose running statistics are module state the report keeps).

Always trained (model.train()): in eval mode torch 1.13's
TransformerEncoderLayer takes its fused fast path, with no dropout and no
autograd, which is not what a training step checkpoints."""
import torch
import torch.nn.functional as F
from torch import nn

D_MODEL, HEADS, FEED_FORWARD, LAYERS = 32, 4, 64, 4
BATCH, SEQ = 4, 8
DROPOUT = 0.1


class EncoderStack(nn.Module):
    def __init__(self):
        super().__init__()
        # The projection makes the stack's input require grad, which
        # reentrant checkpoints need to reach the first layer's parameters.
        self.embed = nn.Linear(D_MODEL, D_MODEL)
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(D_MODEL, HEADS, FEED_FORWARD, dropout=DROPOUT, batch_first=True)
            for _ in range(LAYERS))
        self.head = nn.Linear(D_MODEL, D_MODEL)
        self.norm_out = nn.BatchNorm1d(D_MODEL)  # outside any checkpoint: updated once per step


def model_fn():
    return EncoderStack()


def batch_fn(step):
    return torch.randn(BATCH, SEQ, D_MODEL), torch.randn(BATCH, SEQ, D_MODEL)


def step(model, batch, stack):
    """One training step's loss; `stack(layers, x)` runs the encoder layers
    (plainly, or checkpointed as the adapter says)."""
    x, target = batch
    h = stack(model.layers, model.embed(x))
    out = model.norm_out(model.head(h).transpose(1, 2)).transpose(1, 2)
    return F.mse_loss(out, target)
