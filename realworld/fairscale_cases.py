"""fairscale's checkpoint_wrapper on the Stack model, with and without
offload_to_cpu (a ckpt_verify.Run prepare wraps each block in place).

Known bug, as shipped (fairscale 0.4.13; issue #1199, open): the recompute
re-enters only CUDA autocast (torch.cuda.amp.autocast, gated on
torch.is_autocast_enabled(), which is CUDA's state), so under CPU bf16
autocast the forward runs in bf16 and the recompute in float32: ERROR. The
fixed version is a patch of the module's two autocast helpers that captures
the CPU autocast dtype in forward and re-enters it in the recompute: PASS."""
from __future__ import annotations

import importlib.util
from contextlib import contextmanager

import torch

from . import models, patching
from .case import Case, RunSpec

PKG = "fairscale"
FIX = "fairscale_fix1199"


def _missing() -> str | None:
    if importlib.util.find_spec("fairscale") is None:
        return "fairscale is not installed (env/requirements.txt pins it)"
    return None


def _wrap(offload: bool):
    def wrap(block):
        from fairscale.nn.checkpoint import checkpoint_wrapper
        return checkpoint_wrapper(block, offload_to_cpu=offload)
    return models.wrap_blocks(wrap)


def _autocast(step):
    def run(model, batch):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return step(model, batch)
    return run


def _install_fix():
    """Device-generic autocast capture and replay for fairscale's CheckpointFunction."""
    from fairscale.nn.checkpoint import checkpoint_activations as ca

    def captured(original):
        if torch.is_autocast_enabled("cpu"):
            return ("cpu", torch.get_autocast_dtype("cpu"))
        return original()

    @contextmanager
    def replay(original, enabled):
        if isinstance(enabled, tuple):
            with torch.autocast(enabled[0], dtype=enabled[1]):
                yield
        else:
            with original(enabled):
                yield
    patching.patch(ca, "is_autocast_enabled", FIX, captured)
    patching.patch(ca, "autocast", FIX, replay)


def cases() -> list[Case]:
    skip = _missing()
    ok = "the recompute replays the RNG and the keyword arguments: bitwise as the plain step"
    plain = Case(name="fairscale_checkpoint", framework="fairscale", package=PKG, model=models.MODEL,
                 model_fn=models.stack_fn, batch_fn=models.stack_batch, baseline=models.plain_step, skip=skip, runs=[
        RunSpec("fairscale_wrapper", "fairscale checkpoint_wrapper", ok, prepare=_wrap(False)),
        RunSpec("fairscale_wrapper_offload", "fairscale checkpoint_wrapper(offload_to_cpu=True)",
                ok + " (on the CPU the offload copy is the tensor itself)", prepare=_wrap(True)),
    ])
    amp = Case(name="fairscale_checkpoint_autocast", framework="fairscale", package=PKG,
               model=models.MODEL + ", CPU bf16 autocast", model_fn=models.stack_fn, batch_fn=models.stack_batch,
               baseline=_autocast(models.plain_step), skip=skip, setup=_install_fix, runs=[
        RunSpec("fairscale_bug_cpu_autocast", "fairscale checkpoint_wrapper as shipped, CPU bf16 autocast",
                "the recompute re-enters CUDA autocast only: float32 recompute of a bf16 forward",
                prepare=_wrap(False), step=_autocast(models.plain_step), expect="ERROR",
                reason_has="must have the same dtype", known_bug="facebookresearch/fairscale issue #1199 (open)",
                fixed_by="fairscale_fixed_cpu_autocast"),
        RunSpec("fairscale_fixed_cpu_autocast", "fairscale checkpoint_wrapper, autocast helpers patched",
                "forward's CPU autocast dtype captured and re-entered in the recompute",
                prepare=_wrap(False), step=_autocast(models.plain_step), variant=FIX),
    ])
    return [plain, amp]
