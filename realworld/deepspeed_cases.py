"""DeepSpeed's activation checkpointing (deepspeed.checkpointing.checkpoint
and non_reentrant_checkpoint) on the Stack model, on the CPU accelerator at
world size 1 (gloo), with its options: partition_activations,
contiguous_memory_optimization and checkpoint_in_cpu (cpu_checkpointing).
Each run configures deepspeed.checkpointing as its step begins (the
configuration is module state).

Known bug, as shipped (0.19.8, CPU accelerator): checkpoint_in_cpu without
partitioning (the path added for issue #541 by PR #1254) copies each input
to the CPU with .to('cpu'), which on the CPU returns the tensor itself; the
input's storage is then swapped for a 0-D placeholder and that placeholder
is what the recompute gets: ERROR. The fixed version clones the CPU copy,
as a device-to-host copy would be: PASS.

Found here, as shipped (0.19.8, any accelerator): with partition_activations
at model-parallel size 1, gather_partitioned_activations takes a shortcut
that hands the recompute a reshaped view but leaves the caller's input
flattened. An activation does not mind; a leaf input that requires grad (a
model's learned latent queries fed straight into a checkpointed block) is
left flat, and its gradient cannot be accumulated: ERROR. The fixed version
gives the input its shape back, as the multi-rank path does: PASS.

Set-up note: deepspeed.init_distributed on the CPU JIT-compiles a
shared-memory allreduce op (about two minutes cold) that world size 1
never calls; the suite has build_shm_op return None, DeepSpeed's own value
when the op is unavailable. Nothing of the checkpoint is changed."""
from __future__ import annotations

import functools
import importlib.util
import os
import tempfile

import torch

from . import models, patching
from .case import Case, RunSpec

PKG = "deepspeed"
FIX = "deepspeed_cpu_copy_fix"
LEAF_FIX = "deepspeed_mp1_shape_fix"
_ready = []


def _missing() -> str | None:
    if importlib.util.find_spec("deepspeed") is None:
        return "deepspeed is not installed (env/requirements.txt pins it)"
    return None


def _setup():
    if _ready:
        return
    os.environ.setdefault("DS_ACCELERATOR", "cuda" if torch.cuda.is_available() else "cpu")
    import importlib

    import deepspeed
    import torch.distributed as dist
    from deepspeed.runtime.activation_checkpointing import checkpointing as ck

    # (deepspeed.comm re-exports the name torch: import the submodule by path)
    importlib.import_module("deepspeed.comm.torch").build_shm_op = lambda: None
    if not dist.is_initialized():
        init = os.path.join(tempfile.mkdtemp(prefix="realworld_ds."), "rendezvous")
        dist.init_process_group("gloo", init_method=f"file://{init}", rank=0, world_size=1)
    deepspeed.init_distributed(dist_backend="gloo")

    def cloned_cpu_copy(original, args, inputs):
        inputs = [inp.clone() if torch.is_tensor(inp) and inp is arg else inp for arg, inp in zip(args, inputs)]
        return original(args, inputs)
    patching.patch(ck, "get_cpu_activations_for_backward", FIX, cloned_cpu_copy)

    def shape_restored(original, tensors, device=None):
        out = original(tensors, device)
        for item, size in zip(tensors[0::2], tensors[1::2]):
            if torch.is_tensor(item) and torch.is_tensor(size) and list(item.shape) != size.tolist():
                item.data = item.data.view(size.tolist())
        return out
    patching.patch(ck, "gather_partitioned_activations", LEAF_FIX, shape_restored)
    _ready.append(True)


def _region(options: dict, non_reentrant: bool = False):
    def step(model, batch):
        from deepspeed.runtime.activation_checkpointing import checkpointing as ck
        ck.configure(None, **options)
        fn = ck.non_reentrant_checkpoint if non_reentrant else ck.checkpoint

        def region(block, x, **kw):
            return fn(functools.partial(block, **kw), x)
        return models.region_step(region)(model, batch)
    return step


PARTITION = {"partition_activations": True}
CONTIGUOUS = {"partition_activations": True, "contiguous_checkpointing": True, "num_checkpoints": models.LAYERS}
PARTITION_CPU = {"partition_activations": True, "checkpoint_in_cpu": True}
CPU_ONLY = {"checkpoint_in_cpu": True}


class Latent(torch.nn.Module):
    """The Stack with learned latent queries (a parameter) as the first
    block's input, the input projection added after it."""

    def __init__(self) -> None:
        super().__init__()
        self.latent = torch.nn.Parameter(torch.randn(models.BATCH, models.SEQ, models.HIDDEN))
        self.stack = models.Stack()

    def forward(self, x: torch.Tensor, region=models.plain_region) -> torch.Tensor:
        h = region(self.stack.blocks[0], self.latent, residual_scale=0.5) + self.stack.inp(x)
        for block in self.stack.blocks[1:]:
            h = region(block, h, residual_scale=0.5)
        return self.stack.head(h)


def cases() -> list[Case]:
    skip = _missing()
    ok = "RNG (with the model-parallel tracker) replayed: bitwise as the plain step"
    return [Case(name="deepspeed_checkpoint", framework="deepspeed", package=PKG, model=models.MODEL + ", gloo world 1",
                 model_fn=models.stack_fn, batch_fn=models.stack_batch, baseline=models.plain_step, skip=skip,
                 setup=_setup, runs=[
        RunSpec("ds_checkpoint", "deepspeed.checkpointing.checkpoint", ok, step=_region({})),
        RunSpec("ds_non_reentrant", "deepspeed.checkpointing.non_reentrant_checkpoint", ok,
                step=_region({}, non_reentrant=True)),
        RunSpec("ds_partition", "checkpoint, partition_activations (model-parallel size 1)", ok,
                step=_region(PARTITION)),
        RunSpec("ds_partition_contiguous", "checkpoint, partition_activations + contiguous_memory_optimization",
                ok, step=_region(CONTIGUOUS)),
        RunSpec("ds_partition_cpu", "checkpoint, partition_activations + cpu_checkpointing", ok,
                step=_region(PARTITION_CPU)),
        RunSpec("ds_bug_cpu_checkpoint", "checkpoint, cpu_checkpointing without partitioning, as shipped",
                "on the CPU .to('cpu') is the input itself: the recompute gets the 0-D placeholder "
                "(LayerNorm refuses an input of size [])",
                step=_region(CPU_ONLY), expect="ERROR", reason_has="got input of size[]",
                known_bug="deepspeedai/DeepSpeed, the path of PR #1254 (issue #541) on the CPU accelerator",
                fixed_by="ds_fixed_cpu_checkpoint"),
        RunSpec("ds_fixed_cpu_checkpoint", "checkpoint, cpu_checkpointing without partitioning, CPU copy cloned",
                "the saved CPU copy is a new tensor, as a device-to-host copy is", step=_region(CPU_ONLY),
                variant=FIX),
    ]), Case(name="deepspeed_partition_leaf_input", framework="deepspeed", package=PKG,
             model=models.MODEL + ", learned latent queries (a parameter) as the first block's input",
             model_fn=Latent, batch_fn=models.stack_batch, baseline=models.plain_step, skip=skip, setup=_setup, runs=[
        RunSpec("ds_leaf_checkpoint", "deepspeed.checkpointing.checkpoint, a parameter as a region's input", ok,
                step=_region({})),
        RunSpec("ds_bug_partition_leaf", "checkpoint, partition_activations (model-parallel size 1), as shipped",
                "the size-1 shortcut leaves the caller's input flattened: the latent's gradient cannot be "
                "accumulated into it", step=_region(PARTITION), expect="ERROR",
                reason_has="must match the size of tensor b",
                known_bug="deepspeedai/DeepSpeed 0.19.8, found by this suite (no upstream report found)",
                fixed_by="ds_fixed_partition_leaf"),
        RunSpec("ds_fixed_partition_leaf", "checkpoint, partition_activations (size 1), input's shape given back",
                "the caller's input gets its shape back, as the multi-rank path does", step=_region(PARTITION),
                variant=LEAF_FIX),
    ])]
