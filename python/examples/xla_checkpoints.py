"""Checkpoints on torch_xla (XLA:CPU), each with the verdict the compiler's
evidence must give it (tests/xla/check_xla_case.py runs them; docs/xla.md
walks through them).

The model: BLOCKS residual MLP blocks (Linear -> GELU(tanh) -> [Dropout] ->
Linear), each block one checkpointed region. Runs:

  torch_xla_checkpoint        torch_xla.utils.checkpoint (reentrant, with an
                              opt-barrier on the recompute's inputs, the
                              incoming gradients and the block's weights,
                              and the XLA RNG seed stashed)
  upstream_reentrant          torch.utils.checkpoint, use_reentrant=True
  upstream_nonreentrant       torch.utils.checkpoint, use_reentrant=False
                              (both need a `torch.xla` device module:
                              XlaDeviceModule below)
  upstream_barrier_context    upstream non-reentrant with a context_fn whose
                              recompute context is a TorchFunctionMode that
                              puts an opt-barrier on the recompute's inputs
                              only (the values it reads that it did not make)
  xla_style                   ReferenceXlaCheckpoint below: torch_xla's
                              recipe written out, its parts as services
  planted_no_barrier          xla_style without the opt-barrier
  planted_barrier_everything  xla_style with a barrier on every tensor the
                              backward could see (all of the model's
                              parameters), not only the recompute's inputs
  planted_no_xla_rng_stash    xla_style that stashes torch's CPU RNG but not
                              XLA's seed (dropout case)
  planted_no_autocast_replay  xla_style that recomputes outside the
                              forward's autocast (bf16 autocast case)
  planted_no_rng_replay       torch_xla.utils.checkpoint with
                              preserve_rng_state=False (dropout case)

The xla_norm_tanh case is another model: NORM_BLOCKS pre-norm blocks
(x + tanh(Linear(LayerNorm(x)))), on which torch_xla's checkpoint with its
barriers kept is fused differently from the plain step: XLA's rounding,
which the rounding rule tells apart (docs/xla.md).

A planted bug is the reference with one service replaced."""
import contextlib
from collections.abc import Callable, Iterator

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode
from torch.utils.checkpoint import checkpoint as upstream_checkpoint
from torch.utils.weak import WeakTensorKeyDictionary

HIDDEN, WIDE, BATCH, BLOCKS = 32, 128, 64, 4


class Block(torch.nn.Module):
    def __init__(self, dropout):
        super().__init__()
        self.fc1 = torch.nn.Linear(HIDDEN, WIDE)
        self.fc2 = torch.nn.Linear(WIDE, HIDDEN)
        self.p = dropout

    def forward(self, x):
        h = F.gelu(self.fc1(x), approximate="tanh")
        if self.p:
            h = F.dropout(h, self.p, self.training)
        return x + self.fc2(h)


class Model(torch.nn.Module):
    def __init__(self, dropout=0.0):
        super().__init__()
        self.blocks = torch.nn.ModuleList(Block(dropout) for _ in range(BLOCKS))

    def forward(self, x, ckpt=None):
        for block in self.blocks:
            x = ckpt(block, x) if ckpt else block(x)
        return x


def model_fn() -> torch.nn.Module:
    return Model()


NORM_BLOCKS = 6


class NormTanhBlock(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(HIDDEN)
        self.fc = torch.nn.Linear(HIDDEN, HIDDEN)

    def forward(self, x):
        return x + torch.tanh(self.fc(self.norm(x)))


class NormTanhModel(Model):
    def __init__(self):
        torch.nn.Module.__init__(self)
        self.blocks = torch.nn.ModuleList(NormTanhBlock() for _ in range(NORM_BLOCKS))


def norm_tanh_model_fn() -> torch.nn.Module:
    return NormTanhModel()


def dropout_model_fn() -> torch.nn.Module:
    return Model(dropout=0.25)


def batch_fn(step: int) -> tuple:
    return torch.randn(BATCH, HIDDEN), torch.randn(BATCH, HIDDEN)


def _loss(model: torch.nn.Module, batch: tuple, ckpt: Callable | None = None) -> torch.Tensor:
    """Every run, the baseline too, makes its input require grad: a
    reentrant checkpoint whose inputs need no grad gives no gradient."""
    x, y = batch
    return F.mse_loss(model(x.detach().requires_grad_(True), ckpt), y)


def baseline(model: torch.nn.Module, batch: tuple) -> torch.Tensor:
    return _loss(model, batch)


def autocast_baseline(model: torch.nn.Module, batch: tuple) -> torch.Tensor:
    with torch.autocast("xla", dtype=torch.bfloat16):
        return _loss(model, batch).float()


# ---- the services of an XLA-style reentrant checkpoint --------------------

def _barrier(tensors: list) -> None:
    import torch_xla.core.xla_model as xm
    xm.optimization_barrier_([t for t in tensors if isinstance(t, torch.Tensor)])


def barrier_recompute_inputs(inputs: list, grads: list, fn: torch.nn.Module, model: torch.nn.Module) -> None:
    """torch_xla's, as it acts on checkpoint(module, x): the recompute's
    inputs and the incoming gradients, which order the recompute after the
    backward reaches the region (torch_xla adds the weights only when the
    function is a bound method of a module)."""
    _barrier([*inputs, *grads])


def barrier_none(inputs: list, grads: list, fn: torch.nn.Module, model: torch.nn.Module) -> None:
    """PLANTED: no barrier; XLA's CSE sees recompute == forward."""


def barrier_everything(inputs: list, grads: list, fn: torch.nn.Module, model: torch.nn.Module) -> None:
    """PLANTED: also every parameter of the whole model: values no
    recompute of this region reads are held up to the barrier."""
    _barrier([*inputs, *grads, *model.parameters()])


def stash_rng() -> tuple:
    import torch_xla.core.xla_model as xm
    return torch.get_rng_state(), xm.get_rng_state()


def stash_cpu_rng_only() -> tuple:
    """PLANTED: torch's CPU generator only; XLA's seed, which the XLA
    dropout draws from, is not stashed."""
    return torch.get_rng_state(), None


@contextlib.contextmanager
def replay_rng(state: tuple) -> Iterator[None]:
    import torch_xla.core.xla_model as xm
    cpu, xla = state
    with torch.random.fork_rng(devices=[]), xm.fork_rng():
        torch.set_rng_state(cpu)
        if xla is not None:
            xm.set_rng_state(xla)
        yield


def capture_autocast() -> tuple:
    return torch.is_autocast_enabled("xla"), torch.get_autocast_dtype("xla")


def replay_autocast(state: tuple) -> contextlib.AbstractContextManager:
    enabled, dtype = state
    return torch.autocast("xla", dtype=dtype, enabled=enabled)


def no_autocast_replay(state: tuple) -> contextlib.AbstractContextManager:
    """PLANTED: the recompute runs in backward's (absent) autocast."""
    return contextlib.nullcontext()


REFERENCE = {"barrier": barrier_recompute_inputs, "stash_rng": stash_rng, "replay_autocast": replay_autocast}


class _XlaStyle(torch.autograd.Function):
    @staticmethod
    def forward(ctx, services, fn, model, x):
        ctx.services, ctx.fn, ctx.model = services, fn, model
        ctx.rng = services["stash_rng"]()
        ctx.autocast = capture_autocast()
        ctx.save_for_backward(x)
        with torch.no_grad():
            return fn(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        ctx.services["barrier"]([x], [grad], ctx.fn, ctx.model)
        x = x.detach().requires_grad_(x.requires_grad)
        with replay_rng(ctx.rng), torch.enable_grad(), ctx.services["replay_autocast"](ctx.autocast):
            out = ctx.fn(x)
        torch.autograd.backward(out, grad)
        return None, None, None, x.grad


def xla_style(services: dict) -> Callable:
    def step(model, batch):
        def ckpt(block, x):
            return _XlaStyle.apply(services, block, model, x)
        return _loss(model, batch, ckpt)
    return step


# ---- upstream torch.utils.checkpoint ---------------------------------------

class XlaDeviceModule:
    """What torch.utils.checkpoint asks of `torch.xla`: upstream looks the
    device module up as getattr(torch, "xla") for every XLA tensor, and
    torch 2.9 + torch_xla 2.9 register none (AttributeError: module 'torch'
    has no attribute 'xla', whatever preserve_rng_state says). This one
    maps the RNG state to XLA's seed (xm.get_rng_state / set_rng_state)."""

    _initialized = True

    @staticmethod
    def device(index):
        return contextlib.nullcontext()

    @staticmethod
    def device_count():
        return 1

    @staticmethod
    def is_available():
        return True

    @staticmethod
    def get_rng_state(device=None):
        import torch_xla.core.xla_model as xm
        return torch.tensor([xm.get_rng_state()], dtype=torch.int64)

    @staticmethod
    def set_rng_state(state, device=None):
        import torch_xla.core.xla_model as xm
        xm.set_rng_state(int(state[0]))


def register_xla_device_module() -> None:
    """The user's set-up step for upstream checkpointing on XLA (once)."""
    if not hasattr(torch, "xla"):
        torch._register_device_module("xla", XlaDeviceModule)


def upstream(use_reentrant: bool, context_fn: Callable | None = None) -> Callable:
    kwargs = {"context_fn": context_fn} if context_fn else {}
    register_xla_device_module()

    def step(model, batch):
        def ckpt(block, x):
            return upstream_checkpoint(block, x, use_reentrant=use_reentrant, **kwargs)
        return _loss(model, batch, ckpt)
    return step


class BarrierOnRecomputeInputs(TorchFunctionMode):
    """The recompute's context: before each op, every tensor argument the
    recompute did not make itself (an input of the region: the saved
    activation, a weight) passes once through an opt-barrier."""

    def __init__(self):
        super().__init__()
        self.made = WeakTensorKeyDictionary()
        self.held = WeakTensorKeyDictionary()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        inputs = [t for t in (*args, *kwargs.values()) if isinstance(t, torch.Tensor)
                  and t.device.type == "xla" and t not in self.made and t not in self.held]
        if inputs:
            _barrier(inputs)
            for t in inputs:
                self.held[t] = True
        out = func(*args, **kwargs)
        for t in out if isinstance(out, (tuple, list)) else [out]:
            if isinstance(t, torch.Tensor):
                self.made[t] = True
        return out


def barrier_context() -> tuple:
    return contextlib.nullcontext(), BarrierOnRecomputeInputs()


def torch_xla_checkpoint(model: torch.nn.Module, batch: tuple) -> torch.Tensor:
    from torch_xla.utils.checkpoint import checkpoint
    return _loss(model, batch, lambda block, x: checkpoint(block, x))


def planted_no_rng_replay(model: torch.nn.Module, batch: tuple) -> torch.Tensor:
    """PLANTED: torch_xla's checkpoint told not to replay the RNG: the
    recompute draws other dropout masks than the forward."""
    from torch_xla.utils.checkpoint import checkpoint
    return _loss(model, batch, lambda block, x: checkpoint(block, x, preserve_rng_state=False))


def autocast(step: Callable) -> Callable:
    def run(model, batch):
        with torch.autocast("xla", dtype=torch.bfloat16):
            return step(model, batch).float()
    return run


def _with(**replace: Callable) -> dict:
    return {**REFERENCE, **replace}


# The cases: (model_fn, baseline, {run: step}, {run: expected verdict}).
CASES = {
    "xla_cse": (model_fn, baseline, {
        "torch_xla_checkpoint": torch_xla_checkpoint,
        "upstream_reentrant": upstream(True),
        "upstream_nonreentrant": upstream(False),
        "upstream_barrier_context": upstream(False, barrier_context),
        "xla_style": xla_style(REFERENCE),
        "planted_no_barrier": xla_style(_with(barrier=barrier_none)),
        "planted_barrier_everything": xla_style(_with(barrier=barrier_everything)),
    }, {"upstream_reentrant": "MEMFAIL", "upstream_nonreentrant": "MEMFAIL", "planted_no_barrier": "MEMFAIL"}),
    "xla_dropout": (dropout_model_fn, baseline, {
        "torch_xla_checkpoint": torch_xla_checkpoint,
        "xla_style": xla_style(REFERENCE),
        "planted_no_xla_rng_stash": xla_style(_with(stash_rng=stash_cpu_rng_only)),
        "planted_no_rng_replay": planted_no_rng_replay,
    }, {"planted_no_xla_rng_stash": "FAIL", "planted_no_rng_replay": "FAIL"}),
    "xla_autocast": (model_fn, autocast_baseline, {
        "torch_xla_checkpoint": autocast(torch_xla_checkpoint),
        "xla_style": autocast(xla_style(REFERENCE)),
        "planted_no_autocast_replay": autocast(xla_style(_with(replay_autocast=no_autocast_replay))),
    }, {"planted_no_autocast_replay": "FAIL"}),
    "xla_norm_tanh": (norm_tanh_model_fn, baseline, {
        "torch_xla_checkpoint": torch_xla_checkpoint,
    }, {}),
}
