"""megatron-core's activation checkpoints at model-parallel size 1:
tensor_parallel.checkpoint (CheckpointFunction, distribute_saved_activations
off) around each block of the Stack model, and CheckpointWithoutOutput
around each block's LayerNorm-fc1-GELU (the output is discarded and
recomputed when fc2's gradient needs it), on one CUDA device.

Both stash the CUDA RNG state unconditionally (megatron.core.tensor_parallel.
random._get_cuda_rng_state calls torch.cuda.get_rng_state), so they need a
CUDA device: without one every run is Skipped with that reason (measured:
'Found no NVIDIA driver on your system'). scripts/gpu-build.sh runs them
where there is one."""
from __future__ import annotations

import functools
import importlib.util
import os
import tempfile

import torch
import torch.nn.functional as F

from . import models
from .case import Case, RunSpec

PKG = "megatron-core"
_ready = []


def _skip() -> str | None:
    if not torch.cuda.is_available():
        return ("needs a CUDA device: megatron.core.tensor_parallel stashes the CUDA RNG state "
                "(torch.cuda.get_rng_state) in every checkpoint, and this torch sees no GPU")
    if importlib.util.find_spec("megatron") is None or importlib.util.find_spec("megatron.core") is None:
        return "megatron-core is not installed in this Python (env/requirements.txt pins it)"
    return None


def _setup():
    if _ready:
        return
    import torch.distributed as dist
    from megatron.core import parallel_state, tensor_parallel
    if not dist.is_initialized():
        init = os.path.join(tempfile.mkdtemp(prefix="realworld_megatron."), "rendezvous")
        dist.init_process_group("gloo", init_method=f"file://{init}", rank=0, world_size=1)
    parallel_state.initialize_model_parallel(1, 1)
    tensor_parallel.model_parallel_cuda_manual_seed(0)
    _ready.append(True)


def _tp_region(block, x, **kw):
    from megatron.core import tensor_parallel
    return tensor_parallel.checkpoint(functools.partial(block, **kw), False, x)


def _without_output(block, x, residual_scale=1.0):
    from megatron.core.tensor_parallel import CheckpointWithoutOutput
    ckpt = CheckpointWithoutOutput()
    act = ckpt.checkpoint(lambda t: F.gelu(block.fc1(block.norm(t))), x)
    out = block.fc2(act)
    ckpt.discard_output_and_register_recompute(out)
    return x * residual_scale + block.drop(out)


def cases() -> list[Case]:
    ok = "the CUDA RNG (and the model-parallel tracker) replayed: bitwise as the plain step"
    return [Case(name="megatron_checkpoint", framework="megatron", package=PKG, model=models.MODEL + ", TP/PP 1",
                 model_fn=models.stack_fn, batch_fn=models.stack_batch, baseline=models.plain_step, device="cuda",
                 skip=_skip(), setup=_setup, runs=[
        RunSpec("megatron_tp_checkpoint", "megatron.core.tensor_parallel.checkpoint", ok,
                step=models.region_step(_tp_region)),
        RunSpec("megatron_without_output", "megatron.core.tensor_parallel.CheckpointWithoutOutput (fc1+GELU)",
                ok + "; the discarded output is recomputed before fc2's backward",
                step=models.region_step(_without_output)),
    ])]
