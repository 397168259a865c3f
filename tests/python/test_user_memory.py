"""Memory is judged by default for a user's checkpoint (docs/memory.md, "A
user's checkpoint"): every run's bytes held at the end of forward against
the statement drawn from the plain baseline's memory map and the run's own
recompute. Hand-written checkpoints that are right in their gradients but
wrong in memory are MEMFAIL, naming what they hold; correct ones, with the
bounded state real checkpoints keep, are not."""
import os
import sys

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
import ckpt_verify  # noqa: E402
from ckpt_verify import Run  # noqa: E402

WIDTH, BATCH, TOKENS, BLOCKS = 64, 8, 32, 4


class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.ln = nn.LayerNorm(width)
        self.fc1 = nn.Linear(width, 4 * width)
        self.fc2 = nn.Linear(4 * width, width)
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        return x + self.drop(self.fc2(F.gelu(self.fc1(self.ln(x)))))


class Stack(nn.Module):
    def __init__(self, width=WIDTH, blocks=BLOCKS):
        super().__init__()
        self.blocks = nn.ModuleList(Block(width) for _ in range(blocks))


def model_fn():
    return Stack()


def batch_fn(step):
    return torch.randn(BATCH, TOKENS, WIDTH), torch.randn(BATCH, TOKENS, WIDTH)


def stepper(region, input_grad=False):
    """A step that runs every block through region(block, x); input_grad:
    the input requires grad (torch's reentrant checkpoint needs one that does)."""
    def step(model, batch):
        x, y = batch
        if input_grad:
            x = x.detach().requires_grad_()
        for block in model.blocks:
            x = region(block, x)
        return F.mse_loss(x, y)
    return step


plain = stepper(lambda block, x: block(x))


def _recompute(block, x):
    """The block's forward again, differentiable, on a detached input."""
    with torch.enable_grad():
        xd = x.detach().requires_grad_()
        return xd, block(xd)


def _backward(xd, y, g):
    """The region's backward as torch's reentrant checkpoint runs it: the
    parameters' gradients accumulate where they live (each gradient hook
    fires once), the input's is handed back."""
    torch.autograd.backward(y, g)
    return xd.grad


class Correct(torch.autograd.Function):
    """Forward without grad, the input and the RNG state kept, recompute in backward."""

    @staticmethod
    def forward(ctx, x, block):
        ctx.block, ctx.rng = block, torch.get_rng_state()
        ctx.save_for_backward(x)
        with torch.no_grad():
            return block(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        with torch.random.fork_rng(devices=[]):
            torch.set_rng_state(ctx.rng)
            xd, y = _recompute(ctx.block, x)
        return _backward(xd, y, g), None


class KeepsGraph(torch.autograd.Function):
    """Runs forward with grad and keeps its graph: right gradients, nothing recomputed."""

    @staticmethod
    def forward(ctx, x, block):
        ctx.xd, ctx.y = _recompute(block, x)
        return ctx.y.detach()

    @staticmethod
    def backward(ctx, g):
        return _backward(ctx.xd, ctx.y, g), None


class RecomputesAndKeeps(torch.autograd.Function):
    """Recomputes in backward, but forward's activations stay alive too."""

    @staticmethod
    def forward(ctx, x, block):
        ctx.block, ctx.rng = block, torch.get_rng_state()
        ctx.save_for_backward(x)
        ctx.forward_graph = _recompute(block, x)  # the bug: never let go
        return ctx.forward_graph[1].detach()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        with torch.random.fork_rng(devices=[]):
            torch.set_rng_state(ctx.rng)
            xd, y = _recompute(ctx.block, x)
        return _backward(xd, y, g), None


class KeepsRecomputed(Correct):
    """Correct, except that the recomputed activations stay on the block until the next step."""

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        with torch.random.fork_rng(devices=[]):
            torch.set_rng_state(ctx.rng)
            xd, y = _recompute(ctx.block, x)
        torch.autograd.backward(y, g, retain_graph=True)
        ctx.block.recomputed = (xd, y)  # the bug: the whole recomputed graph, kept
        return xd.grad, None


class RngOnModule(Correct):
    """Correct, keeping its RNG stash on the module (as some wrappers do)."""

    @staticmethod
    def forward(ctx, x, block):
        block.rng_stash = torch.get_rng_state()
        return Correct.forward(ctx, x, block)


def function_region(fn):
    return lambda block, x: fn.apply(x, block)


def with_staging_buffer(model, batch):
    """Correct, with a bounded 64 KiB staging buffer allocated at first use and kept on the model."""
    if not hasattr(model, "staging"):
        model.staging = torch.empty(16384)
    return stepper(function_region(Correct), input_grad=True)(model, batch)


def attach_scratch(model):
    """A run whose model starts with 34,048 B more, freed by its first forward."""
    model.scratch = torch.empty(34048 // 4)
    model.register_forward_pre_hook(lambda m, args: setattr(m, "scratch", None))


RUNS = {
    "torch_nonreentrant": stepper(lambda b, x: checkpoint(b, x, use_reentrant=False)),
    "torch_reentrant": stepper(lambda b, x: checkpoint(b, x, use_reentrant=True), input_grad=True),
    "handwritten": stepper(function_region(Correct), input_grad=True),
    "keeps_graph": stepper(function_region(KeepsGraph), input_grad=True),
    "plain_control": Run(step=plain, memory=None),
    "recomputes_and_keeps": stepper(function_region(RecomputesAndKeeps), input_grad=True),
    "keeps_recomputed": stepper(function_region(KeepsRecomputed), input_grad=True),
    "staging_buffer": with_staging_buffer,
    "rng_on_module": stepper(function_region(RngOnModule), input_grad=True),
}
EXPECT = {"keeps_graph": "MEMFAIL", "recomputes_and_keeps": "MEMFAIL", "keeps_recomputed": "MEMFAIL"}


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    runs = dict(RUNS)
    runs["frees_between_steps"] = Run(prepare=attach_scratch, step=stepper(function_region(Correct), input_grad=True))
    if hasattr(torch.utils.checkpoint, "create_selective_checkpoint_contexts"):
        import functools
        aten = torch.ops.aten
        ctx = functools.partial(torch.utils.checkpoint.create_selective_checkpoint_contexts,
                                [aten.mm.default, aten.addmm.default])
        runs["selective"] = stepper(lambda b, x: checkpoint(b, x, use_reentrant=False, context_fn=ctx))
    out = tmp_path_factory.mktemp("user_memory") / "user_memory.h5"
    return ckpt_verify.verify(model_fn, batch_fn, runs, baseline=plain, steps=3, out=str(out), expect=EXPECT)


def verdict(report, run):
    v = report.verdicts[run]
    return v.verdict, v.reason


def test_torch_non_reentrant_checkpoint_holds_exactly_what_is_stated(report):
    assert verdict(report, "torch_nonreentrant")[0] == "PASS"
    assert "stated" not in verdict(report, "torch_nonreentrant")[1]  # no note on a PASS


def test_torch_reentrant_checkpoint_passes(report):
    assert verdict(report, "torch_reentrant")[0] == "PASS"


def test_a_correct_hand_written_function_passes(report):
    assert verdict(report, "handwritten")[0] == "PASS"


def test_selective_checkpointing_may_keep_what_its_policy_saves(report):
    if "selective" not in report:
        pytest.skip("this torch has no create_selective_checkpoint_contexts")
    assert verdict(report, "selective")[0] == "PASS"


def test_a_checkpoint_that_recomputes_nothing_is_memfail(report):
    v, why = verdict(report, "keeps_graph")
    assert v == "MEMFAIL"
    assert "saves nothing: on none of its 3 step(s)" in why


def test_a_plain_control_run_is_not_judged_for_memory(report):
    v, why = verdict(report, "plain_control")
    assert v == "PASS"
    assert "plain control run" in why


def test_no_pass_whose_memory_was_judged_says_held_bytes_were_not_judged(report):
    judged = [run for run in report if run != "plain_control" and report.verdicts[run].verdict == "PASS"]
    assert judged
    for run in judged:
        assert "not judged" not in verdict(report, run)[1], run


def test_a_checkpoint_that_recomputes_but_keeps_forwards_activations_is_memfail_naming_them(report):
    v, why = verdict(report, "recomputes_and_keeps")
    assert v == "MEMFAIL"  # it holds more than the baseline: it saves nothing, naming what it should not hold
    assert "saves nothing" in why
    assert "still held though recomputed: 24 tensor(s)" in why and "blocks.0.fc1 aten.addmm#0" in why


def test_a_checkpoint_keeping_recomputed_activations_until_the_next_step_is_memfail(report):
    v, why = verdict(report, "keeps_recomputed")
    assert v == "MEMFAIL"
    assert "step 1: keeps 3547136 B born in that step alive after backward, into the next step" in why
    assert "blocks.3.fc1 aten.addmm#0 made in backward (262144 B" in why


def test_a_bounded_staging_buffer_allocated_at_first_use_is_neither_a_leak_nor_a_memfail(report):
    assert verdict(report, "staging_buffer")[0] == "PASS"


def test_an_rng_stash_kept_on_the_module_is_neither_a_leak_nor_a_memfail(report):
    assert verdict(report, "rng_on_module")[0] == "PASS"


def test_memory_freed_between_steps_is_no_leak(report):
    assert verdict(report, "frees_between_steps")[0] == "PASS"


def test_the_report_holds_the_baselines_memory_map(report):
    import h5py
    with h5py.File(report.path, "r") as f:
        mm = f["memory_map"]
        assert mm.attrs["run"] == "baseline_1"  # baseline_0's steps run with no dispatch mode at all
        assert mm.attrs["bytes"] == f["runs/baseline_1/memory"].attrs["end_forward_bytes"]
        assert len(mm["module"]) == mm.attrs["tensors"] == len(mm["bytes"]) == len(mm["saved_by"])
        stated = f["runs/torch_nonreentrant/memory"].attrs
        assert stated["stated_end_forward_bytes"] == stated["end_forward_bytes"]


def test_a_correct_checkpoint_at_width_1024_with_16_tokens_passes(tmp_path):
    def wide():
        return Stack(width=1024, blocks=2)

    def wide_batch(step):
        return torch.randn(1, 16, 1024), torch.randn(1, 16, 1024)

    report = ckpt_verify.verify(wide, wide_batch, {"mine": stepper(lambda b, x: checkpoint(b, x, use_reentrant=False))},
                                baseline=plain, out=str(tmp_path / "wide.h5"), noise_runs=0)
    assert report["mine"] == "PASS", report.verdicts["mine"].reason
