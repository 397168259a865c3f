"""The recompute probe: proves a baseline plain by what it does, not by
what its checkpoint is called. A user's checkpoint may be an
autograd.Function, a saved-tensor hook or a wrapper applied inside
model_fn under any name; whatever it is, it shows in one of these ways
while the baseline trains under this probe:

  - an op runs inside the autograd engine's backward with grad mode on.
    The engine runs a plain backward with grad mode off (no create_graph);
    grad mode on there is a forward being run again: a recompute (torch's
    reentrant and non-reentrant checkpoints both recompute under
    enable_grad, and so must any checkpoint whose recompute is differentiated);
  - saved-tensor default hooks are set while a forward op runs: the
    forward hands its saved tensors to someone (a non-reentrant checkpoint,
    or an offload to the CPU such as torch.autograd.graph.save_on_cpu)
    instead of keeping them;
  - a random op (an op tagged nondeterministic_seeded: dropout, bernoulli,
    rand...) runs inside backward: a plain backward draws nothing, so this
    is a forward's dropout drawn again (a recompute, or a fused Function
    that redraws its mask in backward, even one that restores the
    generators afterwards);
  - a generator's state differs after a backward from before it (the CPU
    default generator, each initialized CUDA device's, Python's `random`,
    numpy's global one): a plain backward draws no random numbers, so this
    sees a recompute or a redraw that does not restore the generators on
    whatever thread it runs, the engine's or a worker the user started,
    where the dispatch mode does not reach.

The first three are seen by RecomputeProbe, a TorchDispatchMode: every op
passes through it unchanged, so a step computes what it computes without
it. It watches the unrecorded warm-up step and every recorded step of the
baseline's second training (baseline_1: every step, the real batches, a
fresh model), whose steps already run under the memory map's dispatch
mode; it allocates nothing through torch's allocator (what it sees is
kept as op names), so baseline_1's bytes are what they are without it,
and baseline_0 runs with no mode at all. The fourth is GeneratorWatch,
which sets no mode and allocates nothing through torch's allocator while
a step is measured (the generators' states are cloned, not copied into
tensors, until the step's figures are taken): it watches the warm-up and
every recorded step of every baseline, so a checkpoint that switches
itself off while a dispatch mode is active is still seen when it redraws.

What none of them sees (docs/external.md, "What the probe cannot see"): a
recompute on a thread the dispatch mode does not reach that draws no
random numbers or restores every generator it drew from."""
import random
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ..errors import CheckpointInBaseline

try:
    import numpy as _np
except ImportError:  # pragma: no cover - numpy is a dependency of the recorder
    _np = None


def _saved_tensor_hooks_active() -> bool:
    top = torch._C._autograd._top_saved_tensors_default_hooks(False)
    # The memory map's own hooks (frontends/memory_map.py) only note who
    # saves what and hand every tensor back: they are not the step's.
    return top is not None and not getattr(top[0], "_ckpt_verify_memory_map", False)


def _is_random(func) -> bool:
    """A random op that draws new numbers. A *_backward op carrying the tag
    (CUDA's memory-efficient and flash attention backward) replays the
    seed and offset its forward drew, as inputs: a plain backward runs
    them, so they are not counted (the generator-state check still sees
    any draw they made)."""
    if torch.Tag.nondeterministic_seeded not in getattr(func, "tags", ()):
        return False
    return not str(func.overloadpacket).endswith("_backward")


def _generators() -> list[tuple[str, object]]:
    """[(name, generator)] of every torch generator a step may draw from:
    the CPU default generator and each CUDA device's, where CUDA is already
    initialized (querying it must not initialize it)."""
    gens: list[tuple[str, object]] = [("the CPU generator", torch.default_generator)]
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        gens += [(f"the cuda:{i} generator", torch.cuda.default_generators[i])
                 for i in range(torch.cuda.device_count())]
    return gens


def _numpy_state():
    return None if _np is None else _np.random.get_state()


def _numpy_same(a, b) -> bool:
    if a is None or b is None:
        return a is b
    return a[0] == b[0] and _np.array_equal(a[1], b[1]) and tuple(a[2:]) == tuple(b[2:])


class GeneratorWatch:
    """Every generator's state before a backward (before()) against after
    it (changed()). before() clones the torch generators' states as
    Generator objects (host memory outside torch's allocator, so a
    measured step's bytes do not see it); changed() reads them out and
    compares, and is called after the step's figures are taken."""

    def __init__(self) -> None:
        self._torch: list[tuple[str, object, object]] = []
        self._python = None
        self._numpy = None

    def before(self) -> None:
        self._torch = [(name, gen, gen.clone_state()) for name, gen in _generators()]
        self._python = random.getstate()
        self._numpy = _numpy_state()

    def changed(self) -> list[str]:
        """Names of the generators whose state differs from before()."""
        moved = [name for name, gen, was in self._torch if not torch.equal(was.get_state(), gen.get_state())]
        if random.getstate() != self._python:
            moved.append("Python's random")
        if not _numpy_same(_numpy_state(), self._numpy):
            moved.append("numpy's global generator")
        self._torch = []
        return moved


@dataclass
class Sightings:
    """What the probe saw, per kind, as (step, what) in the order seen."""
    recomputed: list[tuple[int, str]] = field(default_factory=list)  # op run with grad mode on in backward
    hooked: list[tuple[int, str]] = field(default_factory=list)      # forward op run with saved-tensor hooks set
    random_ops: list[tuple[int, str]] = field(default_factory=list)  # random op run in backward
    redrawn: list[tuple[int, str]] = field(default_factory=list)     # generator whose state a backward changed

    def finding(self) -> str:
        seen = []
        if self.recomputed:
            seen.append(f"{_where(self.recomputed)}{len(self.recomputed)} op(s) ran again with grad enabled during "
                        f"its backward, first {', '.join(_first(self.recomputed))} (a recompute)")
        if self.hooked:
            seen.append(f"{_where(self.hooked)}{len(self.hooked)} forward op(s) ran with saved-tensor hooks set, "
                        f"first {', '.join(_first(self.hooked))}")
        if self.random_ops:
            seen.append(f"{_where(self.random_ops)}{len(self.random_ops)} random op(s) ran during its backward, "
                        f"first {', '.join(_first(self.random_ops))} (a plain backward draws no random numbers: "
                        f"a recompute or a mask drawn again)")
        if self.redrawn:
            seen.append(f"{_where(self.redrawn)}the state of {', '.join(_first(self.redrawn, 8))} changed during "
                        f"its backward (a plain backward draws no random numbers: something drew again, on "
                        f"whatever thread, without restoring the generator)")
        return "; ".join(seen)


class RecomputeProbe(TorchDispatchMode):
    """Enter around a step's forward and backward; call step_starts(k) as
    a step begins (its number labels what is seen), backward_starts() just
    before the backward call (after its initial gradient is made) and
    backward_ends() after it (which compares the generators' states).
    finding() then says what was seen ("" when every step ran plainly).
    generators=False leaves the generators to the caller's own
    GeneratorWatch (a recorded step compares them outside its timed
    phases)."""

    def __init__(self, generators: bool = True) -> None:
        super().__init__()
        self.in_backward = False
        self.step = 0
        self.seen = Sightings()
        self._generators = GeneratorWatch() if generators else None
        # Random ops run in forward: no finding (dropout draws there), but
        # what a comparison with differently drawn masks cannot claim.
        self.forward_random: list[str] = []

    def step_starts(self, step: int) -> None:
        self.step = step

    def backward_starts(self) -> None:
        if self._generators is not None:
            self._generators.before()
        self.in_backward = True

    def backward_ends(self) -> None:
        self.in_backward = False
        if self._generators is not None:
            self.seen.redrawn += [(self.step, name) for name in self._generators.changed()]

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if self.in_backward:
            if torch.is_grad_enabled():
                self.seen.recomputed.append((self.step, str(func.overloadpacket)))
            if _is_random(func):
                self.seen.random_ops.append((self.step, str(func.overloadpacket)))
        else:
            if _saved_tensor_hooks_active():
                self.seen.hooked.append((self.step, str(func.overloadpacket)))
            if _is_random(func) and str(func.overloadpacket) not in self.forward_random:
                self.forward_random.append(str(func.overloadpacket))
        return func(*args, **(kwargs or {}))

    def finding(self) -> str:
        return self.seen.finding()


def refusal(run_name: str, seen: str, step_fn: Callable | None = None) -> CheckpointInBaseline:
    """The CheckpointInBaseline for a baseline in which `seen` was seen.
    The fix names what the user wrote: the step given as baseline= (when
    one was), else model_fn, and shows the call that moves the checkpoint
    into a run, with nothing in it left undefined."""
    given = step_fn is not None and not getattr(step_fn, "is_default_baseline", False)
    name = getattr(step_fn, "__name__", "") if given else ""
    step = name if name.isidentifier() else "your_checkpointed_step"
    via_step = (f"if baseline={step} is your checkpointed step, pass your plain step as baseline= and that one "
                f"as a run, runs={{'mine': {step}}}; " if given else "")
    return CheckpointInBaseline(
        f"run {run_name}: the baseline checkpoints: {seen}. The baseline must be the plain step on the plain "
        f"model: {via_step}if model_fn applies the checkpoint, build the plain model there and apply it in a run, "
        f"e.g. runs={{'mine': ckpt_verify.Run(prepare=lambda model: model.gradient_checkpointing_enable())}}")


def _where(sightings: list[tuple[int, str]]) -> str:
    step = sightings[0][0]
    return "" if step == 0 else f"in step {step}, "


def _first(sightings, n=3) -> list[str]:
    out: list[str] = []
    for item in sightings:
        what = item[1] if isinstance(item, tuple) else item
        if what not in out:
            out.append(what)
        if len(out) == n:
            break
    return out
