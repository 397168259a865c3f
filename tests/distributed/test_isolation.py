"""Distributed runs are isolated and reproducible as one process's are
(issue 42, items 5 and 7): every rank trains on its own copy of the
batches, a run whose step changes its batch in place is an ERROR naming
the batch, the tensor and the rank, and a correct run after it still
PASSes bitwise; every rank seeds Python's `random` too, so a LayerDrop
choosing layers with it trains the same layers in every run."""
import random

import pytest
import torch.nn.functional as F
from models import Stack, batch_fn, nonreentrant, plain

import ckpt_verify


class LayerDropStack(Stack):
    """Each block skipped when Python's random says so (each rank draws
    from its own seeded stream, the same one in every run)."""

    def forward(self, x, y, region=None):
        x = self.inp(x)
        for b in self.blocks:
            if random.random() < 0.5:
                continue
            x = region(b, x) if region else b(x)
        return F.mse_loss(x, y)


def normalises_in_place(model, batch):
    x, y = batch
    x.sub_(x.mean())
    return model(x, y)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("isolation") / "isolation.h5"
    return ckpt_verify.verify(Stack, batch_fn, {"normalises": normalises_in_place, "correct": nonreentrant},
                              baseline=plain, world_size=2, parallel="ddp", noise_runs=0, against_single=False,
                              out=str(out), expect={"normalises": "ERROR"})


def test_a_run_that_changes_its_batch_in_place_is_named_with_its_rank(report):
    v = report.verdicts["normalises"]
    assert v.verdict == "ERROR"
    assert v.reason.startswith("run normalises changed batch 1 in place (inputs/1/0) on rank 0"), v.reason


def test_a_correct_run_after_it_still_passes(report):
    assert report["correct"] == "PASS", report.verdicts["correct"].reason


def test_layerdrop_with_pythons_random_passes_on_every_rank(tmp_path):
    report = ckpt_verify.verify(LayerDropStack, batch_fn, {"mine": nonreentrant}, baseline=plain, world_size=2,
                                parallel="ddp", noise_runs=0, against_single=False, out=str(tmp_path / "r.h5"),
                                parallel_options={"find_unused_parameters": True})
    assert report["mine"] == "PASS", report.verdicts["mine"].reason
