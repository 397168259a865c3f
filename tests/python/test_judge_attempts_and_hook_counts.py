"""The judge through verify(), on torch's own checkpoints and a flaky one
(issue 42, items 2 and 6): every attempt of a run (the run and its
re-runs) must lie inside the envelope, so a checkpoint wrong in one attempt
FAILs though its re-run reproduces baseline_0; and hook counts are judged
against the baseline's own, so torch's reentrant checkpoint on a block two
micro-batches share in one graph FAILs with its gradients named right and
the two counts side by side, while the non-reentrant one passes."""
import os
import sys

import torch
from torch.utils.checkpoint import checkpoint

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
import ckpt_verify  # noqa: E402


def model_fn():
    return torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.GELU(), torch.nn.Linear(16, 16))


def batch_fn(step):
    g = torch.Generator().manual_seed(step)
    return torch.randn(8, 16, generator=g), torch.randn(8, 16, generator=g)


def two_micro_batches(model, batch, wrap=lambda m, x: m(x)):
    """Both halves of the batch through the same block, one graph, one backward."""
    x, y = batch
    return sum(((wrap(model, x[i:i + 4]) - y[i:i + 4]) ** 2).mean() for i in (0, 4))


def torch_checkpoint(use_reentrant):
    def step(model, batch):
        return two_micro_batches(model, batch,
                                 lambda m, x: checkpoint(m, x.requires_grad_(), use_reentrant=use_reentrant))
    return step


def test_torch_reentrant_on_a_shared_block_fails_on_hook_counts_with_its_gradients_right(tmp_path):
    report = ckpt_verify.verify(model_fn, batch_fn,
                                {"reentrant": torch_checkpoint(True), "nonreentrant": torch_checkpoint(False)},
                                baseline=two_micro_batches, out=str(tmp_path / "shared.h5"),
                                expect={"reentrant": "FAIL"})
    reentrant = report.verdicts["reentrant"]
    assert reentrant.verdict == "FAIL"
    assert reentrant.reason.startswith("gradients bitwise identical to baseline_0, but the gradient hook of parameter")
    assert "fired 2 time(s) in backward call 1 of step 1 (1 call(s) per step), where baseline_0's fired 1" in \
        reentrant.reason
    assert "DDP without static_graph=True" in reentrant.reason
    assert report.verdicts["nonreentrant"].verdict == "PASS"


class FlakyOnce:
    """A checkpoint-like step that is wrong in one training only: from step 2
    of the first model it trains twice (the warm-up and the memory map train
    one step each), its loss is scaled; every later model trains right."""

    def __init__(self):
        self.flaky = None

    def __call__(self, model, batch):
        # Counted on the model itself: an id() is reused once a model is gone
        # (the unrecorded warm-up and memory-map steps train a model each).
        n = model.steps_taken = getattr(model, "steps_taken", 0) + 1
        if n == 2 and self.flaky is None:
            self.flaky = model
        x, y = batch
        loss = ((checkpoint(model, x, use_reentrant=False) - y) ** 2).mean()
        return loss * 1.001 if model is self.flaky else loss


def test_a_checkpoint_wrong_in_one_attempt_fails_though_its_rerun_reproduces_baseline_0(tmp_path):
    report = ckpt_verify.verify(model_fn, batch_fn, {"flaky": FlakyOnce()}, out=str(tmp_path / "flaky.h5"),
                                baseline=lambda model, batch: ((model(batch[0]) - batch[1]) ** 2).mean(),
                                expect={"flaky": "FAIL"})
    flaky = report.verdicts["flaky"]
    assert flaky.verdict == "FAIL"
    assert flaky.reason.startswith("differs in 1 of 2 attempts (the run and 1 re-run(s); the worst, flaky): steps/2/")
    assert "its 2 baselines agree bitwise, flaky differs by" in flaky.reason
