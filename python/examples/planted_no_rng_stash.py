"""A reentrant-style checkpoint written in Python, twice: as it should be
(the RNG state stashed in forward and restored, under a forked RNG, for the
recompute) and with the planted bug of not stashing it, so the recompute's
dropout draws other masks. The first PASSes, the second must FAIL. A
third backpropagates through its recompute in two passes over halves of
the gradient (a checkpoint that handles each output, or each micro-step,
in its own autograd.backward): its gradients come out bitwise right, but
every parameter's gradient hook fires twice in one backward, which breaks
DDP's "mark ready once" (PyTorch #24005); the hook count catches it. A
fourth keeps each recompute's output (and so its graph) after backward, a
leak across steps (PyTorch #80151): right gradients, and each step starts
with more live bytes than the one before, beyond what the baseline grew;
for a user's model that takes two consecutive steps of growth to tell from
bounded state allocated once, so this example trains 3 steps.

    python -m ckpt_verify python/examples/planted_no_rng_stash.py"""
import torch

from ckpt_verify import adapters
from transformer_stack import batch_fn, model_fn, step  # noqa: F401 (read by the CLI)


def _cuda_devices(tensors):
    return sorted({t.device.index or 0 for t in tensors if t.is_cuda})


class PythonCheckpoint(torch.autograd.Function):
    """Forward without saving activations; backward recomputes the region
    with grad enabled and backpropagates through the recompute."""

    # PLANTED BUG (keep_recompute): recomputed outputs kept here for ever.
    kept = []

    @staticmethod
    def forward(ctx, fn, stash_rng, halves, x, keep_recompute=False):
        ctx.fn, ctx.stash_rng, ctx.halves, ctx.keep = fn, stash_rng, halves, keep_recompute
        if stash_rng:
            ctx.devices = _cuda_devices([x])
            ctx.cpu_state = torch.get_rng_state()
            ctx.cuda_states = [torch.cuda.get_rng_state(d) for d in ctx.devices]
        ctx.save_for_backward(x)
        with torch.no_grad():
            return fn(x)

    @staticmethod
    def backward(ctx, grad_out):
        (x,) = ctx.saved_tensors
        x = x.detach().requires_grad_(True)
        if ctx.stash_rng:
            # Replay forward's random stream without moving the live one.
            with torch.random.fork_rng(devices=ctx.devices):
                torch.set_rng_state(ctx.cpu_state)
                for d, state in zip(ctx.devices, ctx.cuda_states):
                    torch.cuda.set_rng_state(state, d)
                with torch.enable_grad():
                    out = ctx.fn(x)
        else:
            # PLANTED BUG: no stash, no restore: dropout draws new masks.
            with torch.enable_grad():
                out = ctx.fn(x)
        if ctx.halves:
            # PLANTED BUG: two passes over halves (exact, so the sums are
            # the same bits), each firing the parameters' hooks.
            half = grad_out * 0.5
            torch.autograd.backward(out, half, retain_graph=True)
            torch.autograd.backward(out, half)
        else:
            torch.autograd.backward(out, grad_out)
        if ctx.keep:
            PythonCheckpoint.kept.append(out)
        return None, None, None, x.grad, None


def python_checkpoint(stash_rng, halves=False, keep_recompute=False):
    def wrap(fn, x):
        return PythonCheckpoint.apply(fn, stash_rng, halves, x, keep_recompute)
    return wrap


baseline = adapters.with_stack(step, adapters.stack_of(adapters.plain))
steps = 3  # the leak check of a user's model needs 3 (docs/schema.md, run checks)
runs = {
    "py_reentrant": adapters.with_stack(step, adapters.stack_of(python_checkpoint(stash_rng=True))),
    "py_reentrant_no_rng_stash": adapters.with_stack(step, adapters.stack_of(python_checkpoint(stash_rng=False))),
    "py_reentrant_backward_in_halves": adapters.with_stack(
        step, adapters.stack_of(python_checkpoint(stash_rng=True, halves=True))),
    "py_reentrant_keeps_recompute": adapters.with_stack(
        step, adapters.stack_of(python_checkpoint(stash_rng=True, keep_recompute=True))),
}
expect = {"py_reentrant_no_rng_stash": "FAIL", "py_reentrant_backward_in_halves": "FAIL",
          "py_reentrant_keeps_recompute": "FAIL"}
