"""A script for `python -m ckpt_verify SCRIPT ARGS`: its own argument
parser reads --width and --plant from sys.argv, as a user's script would.
--plant gives the run a checkpoint without RNG replay (expected to FAIL,
and not declared so: exit 1)."""
import argparse
import sys

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

ap = argparse.ArgumentParser()
ap.add_argument("--width", type=int, default=4)
ap.add_argument("--plant", action="store_true")
args = ap.parse_args()
print(f"argv: {sys.argv[1:]}")
name = f"argv_w{args.width}"


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(args.width, args.width)

    def forward(self, x, wrap=None):
        def block(t):
            return F.dropout(F.gelu(self.fc(t)), 0.3, training=True)
        return (wrap(block, x) if wrap else block(x)).square().mean()


def model_fn():
    return Net()


def batch_fn(step):
    return torch.randn(3, args.width)


def baseline(model, batch):
    return model(batch)


def checkpointed(model, batch):
    return model(batch, lambda f, t: checkpoint(f, t, use_reentrant=False, preserve_rng_state=not args.plant))


runs = {"planted" if args.plant else "checkpointed": checkpointed}
