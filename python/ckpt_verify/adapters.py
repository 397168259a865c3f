"""torch.utils.checkpoint as step functions for verify().

Two shapes of user code are served:
  - a region wrapper `wrap(fn, *args)`: checkpoint one region of the model
    (`reentrant`, `nonreentrant`, `selective()`, or your own), and
  - a stack runner `stack(layers, x)`: run a list of modules, checkpointed
    the way the adapter says (`stack_of(wrap)`, `sequential(segments)`).
`torch_checkpoint_runs(step)` turns one `step(model, batch, stack) -> loss`
into the plain baseline and a run per torch.utils.checkpoint flavour.
An adapter that this torch lacks is a Skipped(reason), which verify()
reports instead of running."""
import functools
import inspect
from collections.abc import Callable
from typing import Any

import torch
import torch.utils.checkpoint as tuc


class Skipped:
    """A run that cannot be taken here, with the reason (reported, not run)."""

    def __init__(self, reason: str):
        self.reason = reason

    def __repr__(self) -> str:
        return f"Skipped({self.reason!r})"


def plain(fn: Callable, *args: Any) -> Any:
    """No checkpoint: the region runs as it is."""
    return fn(*args)


def reentrant(fn: Callable, *args: Any) -> Any:
    """torch.utils.checkpoint, reentrant (autograd.Function) flavour."""
    return tuc.checkpoint(fn, *args, use_reentrant=True)


def nonreentrant(fn: Callable, *args: Any) -> Any:
    """torch.utils.checkpoint, non-reentrant (saved-tensor hooks) flavour."""
    return tuc.checkpoint(fn, *args, use_reentrant=False)


def selective_unavailable() -> str | None:
    """None when torch has create_selective_checkpoint_contexts, else why not."""
    if not hasattr(tuc, "create_selective_checkpoint_contexts"):
        return (f"torch {torch.__version__} has no torch.utils.checkpoint.create_selective_checkpoint_contexts "
                f"(torch >= 2.4)")
    return None


def default_ops_to_save() -> list:
    """Matrix products are saved, everything else recomputed (Megatron-style)."""
    aten = torch.ops.aten
    return [aten.mm.default, aten.addmm.default, aten.bmm.default, aten.baddbmm.default]


def selective(ops_to_save: list | None = None) -> Callable | Skipped:
    """A region wrapper: non-reentrant checkpoint with a selective policy
    (the ops in ops_to_save are saved, the rest recomputed). Skipped(reason)
    when this torch has no selective checkpointing."""
    why = selective_unavailable()
    if why:
        return Skipped(why)
    ops = list(ops_to_save) if ops_to_save is not None else default_ops_to_save()
    context_fn = functools.partial(tuc.create_selective_checkpoint_contexts, ops)

    def wrap(fn, *args):
        return tuc.checkpoint(fn, *args, use_reentrant=False, context_fn=context_fn)
    return wrap


def stack_of(wrap: Callable) -> Callable:
    """A stack runner that wraps each layer in its own region."""
    def stack(layers, x):
        for layer in layers:
            x = wrap(layer, x)
        return x
    return stack


def stack_in_regions(wrap: Callable, layers_per_region: int) -> Callable:
    """A stack runner that wraps consecutive groups of layers as one region."""
    def stack(layers, x):
        layers = list(layers)
        for i in range(0, len(layers), layers_per_region):
            group = layers[i:i + layers_per_region]
            x = wrap(lambda h, group=group: _run_all(group, h), x)
        return x
    return stack


def _run_all(layers, x):
    for layer in layers:
        x = layer(x)
    return x


def sequential(segments: int) -> Callable:
    """A stack runner: torch.utils.checkpoint.checkpoint_sequential (reentrant;
    the last segment runs plainly, as torch does)."""
    takes_reentrant = "use_reentrant" in inspect.signature(tuc.checkpoint_sequential).parameters

    def stack(layers, x):
        layers = list(layers)
        if takes_reentrant:
            return tuc.checkpoint_sequential(layers, segments, x, use_reentrant=True)
        return tuc.checkpoint_sequential(layers, segments, x)
    return stack


def with_stack(step: Callable, stack: Callable) -> Callable:
    """step(model, batch, stack) -> loss as a verify() step_fn(model, batch)."""
    def step_fn(model, batch):
        return step(model, batch, stack)
    step_fn.__name__ = getattr(step, "__name__", "step")
    return step_fn


def torch_checkpoint_runs(step: Callable, segments: int = 2) -> tuple[Callable, dict]:
    """(baseline, runs) for verify(): the plain stack, and torch's
    reentrant, non-reentrant, checkpoint_sequential and (torch >= 2.4)
    selective checkpoints of every layer. `step(model, batch, stack)` runs
    the model's layer stack through `stack(layers, x)` and returns the loss."""
    sel = selective()
    runs = {
        "torch_reentrant": with_stack(step, stack_of(reentrant)),
        "torch_nonreentrant": with_stack(step, stack_of(nonreentrant)),
        "torch_sequential": with_stack(step, sequential(segments)),
        "torch_selective": sel if isinstance(sel, Skipped) else with_stack(step, stack_of(sel)),
    }
    return with_stack(step, stack_of(plain)), runs
