"""A checkpoint under DDP, two gloo ranks on this machine: torch's
non-reentrant checkpoint (PASS, bitwise the plain DDP run; NOISE against
one process), and the reentrant one on a model whose Linear is used in two
regions, which DDP refuses (ERROR with DDP's message) unless told the graph
is static; then DDP runs it and its gradients are bitwise right, but the
shared Linear's gradient hook fires twice per backward on each rank where
the plain DDP run's fires once (FAIL: a gradient-scaling hook would scale
twice). docs/distributed.md.

    python -m ckpt_verify python/examples/ddp_checkpoint.py
    python -m ckpt_verify --world-size 4 python/examples/ddp_checkpoint.py"""
import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

import ckpt_verify

world_size = 2
parallel = "ddp"
noise_runs = 1


class Shared(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = torch.nn.Linear(16, 16)
        self.shared = torch.nn.Linear(16, 16)  # used in both regions

    def forward(self, x, y, region=lambda fn, t: fn(t)):
        x = self.inp(x)
        x = region(lambda t: F.gelu(self.shared(t)), x)
        x = region(lambda t: F.gelu(self.shared(t)), x)
        return F.mse_loss(x, y)


def model_fn():
    return Shared()


def batch_fn(step):
    return torch.randn(16, 16), torch.randn(16, 16)


def baseline(model, batch):
    return model(*batch)


def nonreentrant(model, batch):
    return model(*batch, region=lambda fn, t: checkpoint(fn, t, use_reentrant=False))


def reentrant(model, batch):
    return model(*batch, region=lambda fn, t: checkpoint(fn, t, use_reentrant=True))


runs = {"nonreentrant": nonreentrant, "reentrant": reentrant,
        "reentrant_static": ckpt_verify.DistRun(step=reentrant, options={"static_graph": True})}
expect = {"reentrant": "ERROR", "reentrant_static": "FAIL"}
