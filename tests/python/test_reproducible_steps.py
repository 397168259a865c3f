"""pytest: every run's steps are reproducible (issue 42, item 7). Before
each run verify() seeds torch's generators, Python's `random` and numpy's
global generator, so a model that draws from them (LayerDrop, random
augmentation) trains the same way in every run. Baselines that still
disagree on which tensors exist (a generator of the model's own, a clock,
a counter) are refused with ModelNotReproducible naming the tensor,
instead of every run being judged FAIL against them."""
import os
import random
import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import ckpt_verify  # noqa: E402
from ckpt_verify.frontends.eager import seed_all  # noqa: E402

BLOCKS = 8


class LayerDrop(torch.nn.Module):
    """Blocks skipped at random while training (LayerDrop), the choice made
    outside any checkpointed region by `drop()`; the head always runs."""

    def __init__(self, drop):
        super().__init__()
        self.blocks = torch.nn.ModuleList([torch.nn.Linear(8, 8) for _ in range(BLOCKS)])
        self.head = torch.nn.Linear(8, 8)
        self.drop = drop

    def forward(self, x, y, region=None):
        for block in self.blocks:
            if self.drop():
                continue
            x = region(block, x) if region else block(x)
        return F.mse_loss(self.head(F.gelu(x)), y)


def with_pythons_random():
    return LayerDrop(lambda: random.random() < 0.5)


def with_numpys_global_generator():
    return LayerDrop(lambda: np.random.random() < 0.5)


def with_a_generator_of_its_own():
    rng = np.random.default_rng()  # seeded from the OS, not from verify()'s seed
    return LayerDrop(lambda: rng.random() < 0.5)


def batch_fn(step):
    return torch.randn(4, 8), torch.randn(4, 8)


def plain(model, batch):
    return model(*batch)


def checkpointed(model, batch):
    return model(*batch, region=lambda fn, t: checkpoint(fn, t, use_reentrant=False))


def test_seed_all_seeds_pythons_random_and_numpys_global_generator():
    seed_all(7)
    first = (random.random(), np.random.random(), torch.rand(1).item())
    seed_all(7)
    assert (random.random(), np.random.random(), torch.rand(1).item()) == first


def test_layerdrop_with_pythons_random_passes_for_a_correct_checkpoint(tmp_path):
    report = ckpt_verify.verify(with_pythons_random, batch_fn, {"mine": checkpointed}, baseline=plain,
                                out=str(tmp_path / "r.h5"), noise_runs=1)
    assert report["mine"] == "PASS", report.verdicts["mine"].reason


def test_layerdrop_with_numpys_global_generator_passes_for_a_correct_checkpoint(tmp_path):
    report = ckpt_verify.verify(with_numpys_global_generator, batch_fn, {"mine": checkpointed}, baseline=plain,
                                out=str(tmp_path / "r.h5"), noise_runs=1)
    assert report["mine"] == "PASS", report.verdicts["mine"].reason


def test_baselines_that_record_different_tensors_are_refused_naming_the_tensor(tmp_path):
    # 8 blocks x 2 steps dropped at random: the two baselines drop the same
    # blocks with probability 2**-16.
    with pytest.raises(ckpt_verify.ModelNotReproducible,
                       match=r"steps/\d/grads/blocks\.\d\.(weight|bias) is recorded by baseline_\d but not by "
                             r"baseline_\d"):
        ckpt_verify.verify(with_a_generator_of_its_own, batch_fn, {"mine": checkpointed}, baseline=plain,
                           out=str(tmp_path / "r.h5"), noise_runs=1)
    assert os.listdir(tmp_path) == []
