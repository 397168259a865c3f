"""Tiny models for the distributed specifications (tests/distributed):
each rank's slice of a batch of 8 rows, 16 features, so a launch of two
gloo ranks trains in well under a second."""
import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

WIDTH = 64
ROWS = 128


class Block(torch.nn.Module):
    def __init__(self, dropout=0.0):
        super().__init__()
        self.fc = torch.nn.Linear(WIDTH, WIDTH)
        self.drop = torch.nn.Dropout(dropout)

    def forward(self, x):
        return self.drop(F.gelu(self.fc(x)))


class Stack(torch.nn.Module):
    """Blocks in a row; `region(fn, x)` runs each block (a checkpoint or
    the plain call)."""

    def __init__(self, blocks=3, dropout=0.0):
        super().__init__()
        self.inp = torch.nn.Linear(WIDTH, WIDTH)  # the blocks' input requires grad (reentrant checkpoints)
        self.blocks = torch.nn.ModuleList([Block(dropout) for _ in range(blocks)])

    def forward(self, x, y, region=None):
        x = self.inp(x)
        for b in self.blocks:
            x = region(b, x) if region else b(x)
        return F.mse_loss(x, y)


class Shared(torch.nn.Module):
    """One Linear used in two checkpointed regions: with a reentrant
    checkpoint its gradient arrives in two separate backward passes, which
    DDP's reducer, marking each parameter ready once per backward, refuses
    unless it knows the graph is static."""

    def __init__(self):
        super().__init__()
        self.inp = torch.nn.Linear(WIDTH, WIDTH)  # the regions' input requires grad
        self.shared = torch.nn.Linear(WIDTH, WIDTH)
        self.head = torch.nn.Linear(WIDTH, WIDTH)

    def forward(self, x, y, region=None):
        run = region or (lambda fn, t: fn(t))
        x = self.inp(x)
        x = run(lambda t: F.gelu(self.shared(t)), x)
        x = run(lambda t: F.gelu(self.shared(t)), x)
        return F.mse_loss(self.head(x), y)


def batch_fn(step):
    return torch.randn(ROWS, WIDTH), torch.randn(ROWS, WIDTH)


def plain(model, batch):
    return model(*batch)


def nonreentrant(model, batch):
    return model(*batch, region=lambda fn, x: checkpoint(fn, x, use_reentrant=False))


def reentrant(model, batch):
    return model(*batch, region=lambda fn, x: checkpoint(fn, x, use_reentrant=True))


# ---- FSDP (FullyShardedDataParallel) and FSDP2 (fully_shard) ----

def fsdp_units():
    """FSDP's auto-wrap policy: each Block its own FSDP unit."""
    from torch.distributed.fsdp.wrap import ModuleWrapPolicy
    return {"auto_wrap_policy": ModuleWrapPolicy({Block})}


def _checkpoint_blocks(model, check_fn, reentrant=False):
    from functools import partial

    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
        CheckpointImpl,
        apply_activation_checkpointing,
        checkpoint_wrapper,
    )
    impl = CheckpointImpl.REENTRANT if reentrant else CheckpointImpl.NO_REENTRANT
    apply_activation_checkpointing(model, checkpoint_wrapper_fn=partial(checkpoint_wrapper, checkpoint_impl=impl),
                                   check_fn=check_fn)
    return model


def fsdp_checkpoint_inside(model):
    """After FSDP wrapped each Block: the checkpoint goes inside each unit,
    around the Block (FSDP(CheckpointWrapper(Block))), as torch documents."""
    return _checkpoint_blocks(model, lambda m: isinstance(m, Block))


def fsdp_checkpoint_outside(model):
    """Planted wrong order: the checkpoint around the FSDP unit
    (CheckpointWrapper(FSDP(Block))): the recompute runs the unit's
    forward again, all-gather included."""
    from torch.distributed.fsdp import FullyShardedDataParallel
    return _checkpoint_blocks(model, lambda m: isinstance(m, FullyShardedDataParallel) and
                              isinstance(m.module, Block))


def fsdp_reentrant_outside(model):
    """Planted: a reentrant checkpoint around each FSDP unit. Its forward
    runs under no_grad, so FSDP cannot hook the unit's backward; the
    recompute finds the unit idle and all-gathers its parameters again."""
    from torch.distributed.fsdp import FullyShardedDataParallel
    return _checkpoint_blocks(model, lambda m: isinstance(m, FullyShardedDataParallel) and
                              isinstance(m.module, Block), reentrant=True)


def fsdp2_blocks(model):
    """FSDP2's units: each block (or its checkpoint wrapper), before the root."""
    return list(model.blocks)


def fsdp2_checkpoint_then_shard(model):
    """prepare(): checkpoint each Block, then fully_shard shards the
    wrapped blocks: the all-gather stays outside the recompute."""
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointImpl, checkpoint_wrapper
    for i, b in enumerate(model.blocks):
        model.blocks[i] = checkpoint_wrapper(b, checkpoint_impl=CheckpointImpl.NO_REENTRANT)
    return model


def fsdp2_shard_then_checkpoint(model, reentrant=False):
    """Planted wrong order: shard each Block, then put the checkpoint
    around the sharded block: the recompute runs FSDP2's pre-forward
    all-gather again in backward."""
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointImpl, checkpoint_wrapper
    from torch.distributed.fsdp import fully_shard
    for b in model.blocks:
        fully_shard(b)
    fully_shard(model)
    impl = CheckpointImpl.REENTRANT if reentrant else CheckpointImpl.NO_REENTRANT
    for i, b in enumerate(model.blocks):
        model.blocks[i] = checkpoint_wrapper(b, checkpoint_impl=impl)
    return model


def fsdp2_shard_then_reentrant(model):
    """Planted: a reentrant checkpoint around each sharded block (see
    fsdp_reentrant_outside)."""
    return fsdp2_shard_then_checkpoint(model, reentrant=True)


# ---- dropout under per-rank RNG: the RNG stash, right and planted ----

class _StashRng:
    """A non-reentrant checkpoint's RNG replay done by hand (torch's own is
    turned off with preserve_rng_state=False): forward keeps the CPU RNG
    state at the region's start; the recompute restores `replayed()`."""

    def __init__(self, from_rank0):
        self.from_rank0 = from_rank0

    def contexts(self):
        import contextlib

        import torch.distributed as dist
        state = torch.get_rng_state()
        if self.from_rank0:  # planted: every rank replays rank 0's stream
            dist.broadcast(state, src=0)

        @contextlib.contextmanager
        def recompute():
            outside = torch.get_rng_state()
            torch.set_rng_state(state)
            try:
                yield
            finally:
                torch.set_rng_state(outside)
        return contextlib.nullcontext(), recompute()


def _stash_step(from_rank0):
    def step(model, batch):
        def region(fn, x):
            stash = _StashRng(from_rank0)
            return checkpoint(fn, x, use_reentrant=False, preserve_rng_state=False, context_fn=stash.contexts)
        return model(*batch, region=region)
    return step


rng_stash_own = _stash_step(from_rank0=False)
rng_stash_from_rank0 = _stash_step(from_rank0=True)


# ---- ranks that die, hang or raise ----

def _on_rank(rank, action):
    def step(model, batch):
        import ckpt_verify
        ctx = ckpt_verify.rank_context()
        if ctx is not None and ctx.rank == rank:
            action()
        return plain(model, batch)
    return step


def _kill_self():
    import os
    import signal
    os.kill(os.getpid(), signal.SIGKILL)


def _sleep_long():
    import time
    time.sleep(3600)


def _raise():
    raise ValueError("rank 1's own mistake")


rank1_killed = _on_rank(1, _kill_self)
rank1_hangs = _on_rank(1, _sleep_long)
rank1_raises = _on_rank(1, _raise)


class Normed(torch.nn.Module):
    """A Linear and a BatchNorm1d in one region: its running statistics and
    num_batches_tracked are module state, recorded per step."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(WIDTH, WIDTH)
        self.bn = torch.nn.BatchNorm1d(WIDTH)

    def forward(self, x, y, region=None):
        def body(t):
            return self.bn(self.fc(t))
        return F.mse_loss(region(body, x) if region else body(x), y)
