"""The `_vs_single` twins under DDP (issue 40, item 3): a twin takes no
expectation from its run, so a planted bug expected to FAIL leaves the
report ok, its twin saying it was not judged (the run's own FAIL explains
any difference from one process); a twin's NOISE says what it compares,
never kernel non-determinism; with dropout in the model (a module with
p > 0, or a random op the probe saw in forward) the twin says what it can
claim. A step that reaches through the DDP wrapper for a model attribute
gets a hint naming model.module."""
import functools

import pytest
import torch
import torch.nn.functional as F
from models import WIDTH, Stack, batch_fn, nonreentrant, plain, rng_stash_from_rank0
from torch.utils.checkpoint import checkpoint

import ckpt_verify


def through_wrapper(model, batch):
    """A step written for the plain model: under DDP `model` is the wrapper."""
    x, y = batch
    x = model.inp(x)
    for block in model.blocks:
        x = block(x)
    return F.mse_loss(x, y)


def checkpoint_blocks(plain_model):
    """docs/distributed.md's example: a checkpoint applied to the plain
    model's blocks (prepare gets them as model.blocks)."""
    for block in plain_model.blocks:
        block.forward = functools.partial(checkpoint, block.forward, use_reentrant=False)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("twins") / "twins.h5"
    return ckpt_verify.verify(lambda: Stack(dropout=0.25), batch_fn,
                              {"torch_nonreentrant": nonreentrant, "stash_from_rank0": rng_stash_from_rank0,
                               "through_wrapper": through_wrapper,
                               "after_wrap": ckpt_verify.DistRun(after_wrap=lambda ddp: checkpoint_blocks(ddp.module),
                                                                 step=plain)},
                              baseline=plain, world_size=2, parallel="ddp", noise_runs=1, out=str(out),
                              expect={"stash_from_rank0": "FAIL", "through_wrapper": "ERROR"})


def test_an_expected_fail_leaves_the_report_ok(report):
    assert report["stash_from_rank0"] == "FAIL"
    assert report.ok, str(report)


def test_the_twin_of_a_failing_run_is_not_judged_and_says_why(report):
    twin = report.verdicts["stash_from_rank0_vs_single"]
    assert twin.expected
    assert twin.reason.startswith("not judged: stash_from_rank0 is itself FAIL against ddp_baseline_0 (expected), "
                                  "which explains any difference from this family"), twin.reason
    assert "kernel non-determinism" not in twin.reason


def test_the_twin_of_an_error_run_is_not_judged(report):
    twin = report.verdicts["through_wrapper_vs_single"]
    assert twin.expected
    assert twin.reason.startswith("not judged: through_wrapper is itself ERROR against ddp_baseline_0"), twin.reason


def test_a_twins_noise_says_what_it_compares(report):
    twin = report.verdicts["torch_nonreentrant_vs_single"]
    assert twin.verdict == "NOISE", twin.reason
    assert twin.reason.startswith("this run's gradients (2 DDP ranks) vs a single-process run of the same model")
    assert "kernel non-determinism" not in twin.reason


def test_dropout_in_the_model_is_named_with_what_the_twin_can_claim(report):
    reason = report.verdicts["torch_nonreentrant_vs_single"].reason
    assert reason.startswith("this run's gradients (2 DDP ranks) vs a single-process run of the same model, which "
                             "draws random numbers (blocks.0.drop p=0.25, blocks.1.drop p=0.25 and 1 more): the "
                             "ranks' RNG streams differ from one process's, so this says only that the run is no "
                             "further from one process than plain DDP is; its RNG replay is judged against "
                             "ddp_baseline_0 alone"), reason


def test_a_checkpoint_applied_after_wrapping_reaches_the_blocks_through_module(report):
    assert report["after_wrap"] == "PASS", report.verdicts["after_wrap"].reason


def test_a_step_reaching_through_the_ddp_wrapper_is_told_about_module(report):
    reason = report.verdicts["through_wrapper"].reason
    assert "'DistributedDataParallel' object has no attribute 'inp'" in reason, reason
    assert "the step function gets the DDP-wrapped model" in reason
    assert "model.module.inp" in reason


class FunctionalDropout(torch.nn.Module):
    """Dropout drawn by F.dropout in forward: no dropout module to find."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(WIDTH, WIDTH)

    def forward(self, x, y, region=None):
        def body(t):
            return F.dropout(F.gelu(self.fc(t)), 0.25, training=self.training)
        return F.mse_loss(region(body, x) if region else body(x), y)


def test_a_random_op_the_probe_saw_in_forward_is_named(tmp_path):
    report = ckpt_verify.verify(FunctionalDropout, batch_fn, {"torch_nonreentrant": nonreentrant}, baseline=plain,
                                world_size=2, parallel="ddp", noise_runs=0, out=str(tmp_path / "f.h5"))
    twin = report.verdicts["torch_nonreentrant_vs_single"]
    assert "which draws random numbers (random ops in forward: aten." in twin.reason, twin.reason
