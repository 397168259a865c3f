"""torch 2.x's own checkpoints on the Stack model: torch.utils.checkpoint
reentrant and non-reentrant, checkpoint_sequential, selective checkpointing
(create_selective_checkpoint_contexts with a policy), a user context_fn,
early stop on and off, torch.distributed's checkpoint_wrapper and
apply_activation_checkpointing, CPU bf16 autocast, and torch.compile
(inductor) over a checkpointed model against the eager baseline.

Known-bug versions, each a patch around the real torch:
- PRs #14253 and #14518: checkpoint before they made it replay the RNG
  (dropout draws a new mask in the recompute), i.e. preserve_rng_state=False:
  FAIL.
- issue #71124 / PR #71169: the reentrant recompute does not replay the
  forward's CPU autocast state (only CUDA's was captured): ERROR, a bf16
  forward recomputed in float32.
- PR #84908: checkpoint_wrapper (reentrant) handing keyword arguments
  straight to torch.utils.checkpoint, which refuses them: ERROR."""
from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint, checkpoint_sequential

from . import models, patching
from .case import Case, RunSpec

PKG = "torch"


def _reentrant(block, x, **kw):
    return checkpoint(functools.partial(block, **kw), x, use_reentrant=True)


def _nonreentrant(block, x, **kw):
    return checkpoint(block, x, use_reentrant=False, **kw)


def _no_early_stop(block, x, **kw):
    with torch.utils.checkpoint.set_checkpoint_early_stop(False):
        return checkpoint(block, x, use_reentrant=False, **kw)


def _selective_policy(ctx, op, *args, **kwargs):
    from torch.utils.checkpoint import CheckpointPolicy
    if op in (torch.ops.aten.mm.default, torch.ops.aten.addmm.default):
        return CheckpointPolicy.MUST_SAVE
    return CheckpointPolicy.PREFER_RECOMPUTE


def _selective(block, x, **kw):
    from torch.utils.checkpoint import create_selective_checkpoint_contexts
    return checkpoint(block, x, use_reentrant=False,
                      context_fn=functools.partial(create_selective_checkpoint_contexts, _selective_policy), **kw)


class _OpCounter(torch.utils._python_dispatch.TorchDispatchMode):
    """A user's context_fn mode: counts the ops it sees, changes nothing."""

    def __init__(self):
        super().__init__()
        self.ops = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops += 1
        return func(*args, **(kwargs or {}))


def _context_fn(block, x, **kw):
    return checkpoint(block, x, use_reentrant=False, context_fn=lambda: (_OpCounter(), _OpCounter()), **kw)


def _sequential_step(model, batch):
    x, y = batch
    h = model.inp(x)
    blocks = [functools.partial(b, residual_scale=0.5) for b in model.blocks]
    seq = torch.nn.Sequential(*[_Call(f) for f in blocks])
    return F.mse_loss(model.head(checkpoint_sequential(seq, 2, h, use_reentrant=False)), y)


class _Call(torch.nn.Module):
    """A callable as a module, for checkpoint_sequential (its parameters stay the model's)."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


def _no_rng_replay(block, x, **kw):
    # torch before PRs #14253/#14518: nothing stashed, the recompute draws a new dropout mask.
    return checkpoint(functools.partial(block, **kw), x, use_reentrant=True, preserve_rng_state=False)


def _wrapper(impl_name):
    def wrap(block):
        from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointImpl, checkpoint_wrapper
        return checkpoint_wrapper(block, checkpoint_impl=getattr(CheckpointImpl, impl_name))
    return models.wrap_blocks(wrap)


def _apply_ac(model):
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import apply_activation_checkpointing
    apply_activation_checkpointing(model, check_fn=lambda m: isinstance(m, models.Block))


def _install_wrapper_kwargs_bug():
    """checkpoint_wrapper before PR #84908: kwargs passed straight to a reentrant checkpoint."""
    from torch.distributed.algorithms._checkpoint import checkpoint_wrapper as cw

    def old_forward(original, self, *args, **kwargs):
        return self.checkpoint_fn(self._checkpoint_wrapped_module, *args, **kwargs)
    patching.patch(cw.CheckpointWrapper, "forward", "torch_pr84908", old_forward)


def _install_autocast_bug():
    """Reentrant checkpoint before PR #71169: the forward's CPU autocast state is not captured."""
    import torch.utils.checkpoint as tuc

    def cuda_only(original, device_type="cuda"):
        device_kwargs, cpu_kwargs = original(device_type)
        return device_kwargs, dict(cpu_kwargs, enabled=False)
    patching.patch(tuc, "_get_autocast_kwargs", "torch_issue71124", cuda_only)


def _autocast(step):
    def run(model, batch):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return step(model, batch)
    return run


def _compiled(prepare_inner):
    def prepare(model):
        prepare_inner(model)
        return torch.compile(model, backend="inductor")
    return prepare


def _setup_compile():
    import torch._inductor.config as inductor_config
    # Inductor's own RNG draws other dropout masks than eager; its fallback
    # draws eager's, so compiled and eager runs meet on the same masks.
    inductor_config.fallback_random = True


# Raw ULP (the judge's tolerance): inductor's CPU kernels differ from eager
# by 280575 raw ULP on this model (a gradient near zero; 8.75 ULP at the
# tensor's scale; measured here, docs/realworld.md); a
# replay bug (a new dropout mask) is ~10^9.
COMPILE_TOLERANCE_ULP = 2.0**20


def cases() -> list[Case]:
    R = models.region_step
    common = dict(framework="torch", package=PKG, model=models.MODEL, model_fn=models.stack_fn,
                  batch_fn=models.stack_batch, baseline=models.plain_step)
    ok = "bitwise as the plain step: RNG, autocast and saved tensors replayed"
    eager = Case(name="torch_checkpoint", **common, setup=_install_wrapper_kwargs_bug, runs=[
        RunSpec("torch_reentrant", "torch.utils.checkpoint (use_reentrant=True)", ok, step=R(_reentrant)),
        RunSpec("torch_nonreentrant", "torch.utils.checkpoint (use_reentrant=False; early stop on, the default)",
                ok, step=R(_nonreentrant)),
        RunSpec("torch_sequential", "torch.utils.checkpoint.checkpoint_sequential (2 segments)", ok,
                step=_sequential_step),
        RunSpec("torch_selective", "create_selective_checkpoint_contexts (save mm/addmm)", ok, step=R(_selective)),
        RunSpec("torch_context_fn", "checkpoint(context_fn=a user's TorchDispatchMode pair)", ok,
                step=R(_context_fn)),
        RunSpec("torch_early_stop_off", "checkpoint with set_checkpoint_early_stop(False)", ok,
                step=R(_no_early_stop)),
        RunSpec("torch_wrapper_reentrant", "distributed checkpoint_wrapper (REENTRANT)", ok,
                prepare=_wrapper("REENTRANT")),
        RunSpec("torch_wrapper_nonreentrant", "distributed checkpoint_wrapper (NO_REENTRANT)", ok,
                prepare=_wrapper("NO_REENTRANT")),
        RunSpec("torch_apply_ac", "apply_activation_checkpointing (each Block)", ok, prepare=_apply_ac),
        RunSpec("torch_bug_no_rng_replay", "torch.utils.checkpoint before PRs #14253/#14518 (no RNG replay)",
                "the recompute draws a new dropout mask: gradients differ", step=R(_no_rng_replay),
                expect="FAIL", reason_has="/grads/blocks.", known_bug="pytorch/pytorch PRs #14253, #14518",
                fixed_by="torch_reentrant"),
        RunSpec("torch_bug_wrapper_kwargs", "checkpoint_wrapper (REENTRANT) before PR #84908",
                "keyword arguments reach the reentrant checkpoint, which refuses them",
                prepare=_wrapper("REENTRANT"), variant="torch_pr84908", expect="ERROR",
                reason_has="Unexpected keyword arguments", known_bug="pytorch/pytorch PR #84908",
                fixed_by="torch_wrapper_reentrant"),
    ])
    amp = Case(name="torch_checkpoint_autocast", framework="torch", package=PKG,
               model=models.MODEL + ", CPU bf16 autocast", model_fn=models.stack_fn, batch_fn=models.stack_batch,
               baseline=_autocast(models.plain_step), setup=_install_autocast_bug, runs=[
        RunSpec("torch_amp_reentrant", "torch.utils.checkpoint (reentrant) under CPU bf16 autocast",
                "the recompute re-enters the forward's CPU autocast", step=_autocast(R(_reentrant))),
        RunSpec("torch_amp_nonreentrant", "torch.utils.checkpoint (non-reentrant) under CPU bf16 autocast",
                "the recompute re-enters the forward's CPU autocast", step=_autocast(R(_nonreentrant))),
        RunSpec("torch_bug_amp_not_replayed", "reentrant checkpoint before PR #71169 (CPU autocast not replayed)",
                "the recompute runs in float32 while the forward ran in bf16", step=_autocast(R(_reentrant)),
                variant="torch_issue71124", expect="ERROR", reason_has="must have the same dtype",
                known_bug="pytorch/pytorch issue #71124, PR #71169",
                fixed_by="torch_amp_reentrant"),
    ])
    compiled = Case(name="torch_compile_checkpoint", framework="torch", package=PKG,
                    model=models.MODEL + ", torch.compile (inductor, CPU)", model_fn=models.stack_fn,
                    batch_fn=models.stack_batch, baseline=models.plain_step, setup=_setup_compile,
                    noise_runs=0, tolerance=COMPILE_TOLERANCE_ULP, runs=[
        RunSpec("torch_compile_plain", "torch.compile(inductor), no checkpoint: the compiler's own distance",
                "inductor's fused kernels round differently from eager: within the declared tolerance",
                prepare=_compiled(lambda m: None), control=True),
        RunSpec("torch_compile_apply_ac", "torch.compile(inductor) over apply_activation_checkpointing",
                "compiled recompute against the eager baseline: within the declared tolerance",
                prepare=_compiled(_apply_ac)),
    ])
    return [eager, amp, compiled]

