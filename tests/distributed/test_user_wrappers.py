"""A prepare() that wraps blocks in a module of the user's own (which
renames their parameters, "blocks.0.inner.fc.weight") under DDP, FSDP and
FSDP2 over two gloo ranks: the parameters are matched to the plain model's
by identity, as in one process (issue 49, item 5), so a correct
checkpoint inside the wrapper passes bitwise against the plain sharded
run, where it used to be an ERROR saying a wrapper renamed them."""
import pytest
import torch
from models import Block, Stack, batch_fn, plain
from torch.utils.checkpoint import checkpoint

import ckpt_verify


class Checkpointed(torch.nn.Module):
    """The user's own wrapper: the block under another attribute name, run
    under torch's non-reentrant checkpoint."""

    def __init__(self, block):
        super().__init__()
        self.inner = block

    def forward(self, x):
        return checkpoint(self.inner, x, use_reentrant=False)


def wrap_blocks(model):
    for i, b in enumerate(model.blocks):
        model.blocks[i] = Checkpointed(b)
    return model


def blocks_units():
    """FSDP's auto-wrap policy: each Block (inside the user's wrapper) its own unit."""
    from torch.distributed.fsdp.wrap import ModuleWrapPolicy
    return {"auto_wrap_policy": ModuleWrapPolicy({Block})}


@pytest.mark.parametrize("parallel, options", [("ddp", None), ("fsdp", "units"),
                                               ("fsdp2", {"units": lambda m: list(m.blocks)})])
def test_a_wrapper_of_the_users_own_is_matched_by_identity_and_passes(tmp_path, parallel, options):
    report = ckpt_verify.verify(Stack, batch_fn, {"own_wrapper": ckpt_verify.Run(prepare=wrap_blocks)},
                                baseline=plain, world_size=2, parallel=parallel,
                                parallel_options=blocks_units() if options == "units" else options,
                                noise_runs=1, out=str(tmp_path / f"{parallel}.h5"))
    v = report.verdicts["own_wrapper"]
    assert v.verdict == "PASS", v.reason
    assert f"bitwise identical to {parallel}_baseline_0" in v.reason


def test_the_same_prepare_passes_in_one_process(tmp_path):
    report = ckpt_verify.verify(Stack, batch_fn, {"own_wrapper": ckpt_verify.Run(prepare=wrap_blocks)},
                                baseline=plain, noise_runs=1, out=str(tmp_path / "one.h5"))
    assert report["own_wrapper"] == "PASS", report.verdicts["own_wrapper"].reason
