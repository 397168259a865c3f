"""A compiled run with no compiled family gets one (docs/compile.md, "No
family given"): the baseline step under the same compile calls.

A run whose prepare() compiles with code generation (torch.compile's
default Inductor, any backend but "eager" and "aot_eager", which run
ATen's own kernels) rounds otherwise than the eager baseline by
construction, and judged against eager alone a right checkpoint can FAIL
by the compiler's rounding. So, before any training, verify() runs each
such run's prepare() once more on a throw-away plain model with
torch.compile and nn.Module.compile watched, and replays the calls it saw
on the plain model: a family `compiled` (or `compiled_2`, ... when taken)
of plain baselines, and the run is judged against it as if given
`against=`, with its `_vs_eager` twin and, under Inductor, its `_graphs`
twin (families.py).

The contract:

- `calls(plain, prepare)` -> (calls, why): the compile calls prepare(plain)
  made, each on a module of the plain model (by its class and its place
  among the modules of that class, so wrappers a checkpoint adds do not
  move it) or on a bound method of one (`model.forward =
  torch.compile(model.forward)`); ([], "") when it compiles nothing;
  (None, why) when a call cannot be made again on the plain model (a
  function, a module prepare() made, the decorator form).
- `replay(calls)` is a prepare(model) making those calls on a fresh plain
  model, with the user's keyword arguments as given (backend, mode,
  options, dynamic, fullgraph).
- `add_families(...)` adds a family per distinct set of calls to the
  families verify() trains and sets each such run's `against`; it leaves
  alone runs given `against=`, runs whose calls cannot be replayed or
  whose names the twins cannot take (a line on stderr says why, and the
  judge's reason says what to pass: compile_evidence.c)."""
from __future__ import annotations

import contextlib
import copy
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from . import families
from .frontends.class_state import ClassState
from .frontends.eager import Run

# Backends that run ATen's kernels: no rounding of their own to tell apart.
_ATEN_BACKENDS = ("eager", "aot_eager")


@dataclass(frozen=True)
class Call:
    """One compile call of a prepare(), made again on a plain model."""
    kind: str        # "torch.compile" or "Module.compile"
    cls: type        # the module's class
    index: int       # its place among the plain model's modules of that class
    method: str      # "" for the module; else the bound method compiled and assigned back
    kwargs: tuple    # the call's keyword arguments, (name, value) pairs

    def key(self) -> tuple:
        return (self.kind, self.cls, self.index, self.method, tuple((k, repr(v)) for k, v in self.kwargs))

    def generates_code(self) -> bool:
        from .compile_evidence import Backend
        backend = dict(self.kwargs).get("backend", "inductor")
        if isinstance(backend, str):
            return backend not in _ATEN_BACKENDS
        return not (isinstance(backend, Backend) and backend.name == "aot_eager")


@contextlib.contextmanager
def _watched(plain: torch.nn.Module, seen: list, refused: list) -> Iterator[None]:
    """torch.compile and nn.Module.compile noting each call on `plain`'s modules."""
    modules = list(plain.modules())
    real_compile, real_module_compile = torch.compile, torch.nn.Module.compile
    inside = []

    def where(module: Any) -> tuple[type, int] | None:
        if not any(m is module for m in modules):
            return None
        same = [m for m in modules if type(m) is type(module)]
        return type(module), next(i for i, m in enumerate(same) if m is module)

    def note(kind: str, target: Any, kwargs: dict) -> None:
        method = ""
        if not isinstance(target, torch.nn.Module) and isinstance(getattr(target, "__self__", None),
                                                                    torch.nn.Module):
            method, target = target.__name__, target.__self__
        place = where(target) if isinstance(target, torch.nn.Module) else None
        if place is None:
            what = getattr(target, "__qualname__", type(target).__name__)
            refused.append(f"{kind} of {what}, which is not a module of the plain model")
            return
        seen.append(Call(kind, place[0], place[1], method, tuple(sorted(kwargs.items()))))

    def compile_watched(model: Any = None, **kwargs: Any) -> Any:
        if not inside:
            if model is None:
                refused.append("torch.compile used as a decorator factory (no model given)")
            else:
                note("torch.compile", model, kwargs)
        return real_compile(model, **kwargs)

    def module_compile_watched(self: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
        if args:
            refused.append(f"{type(self).__name__}.compile() with positional arguments")
        else:
            note("Module.compile", self, kwargs)
        inside.append(True)  # it calls torch.compile on its own _call_impl
        try:
            return real_module_compile(self, *args, **kwargs)
        finally:
            inside.pop()

    torch.compile, torch.nn.Module.compile = compile_watched, module_compile_watched
    try:
        yield
    finally:
        torch.compile, torch.nn.Module.compile = real_compile, real_module_compile


def calls(plain: torch.nn.Module, prepare: Callable) -> tuple[list[Call] | None, str]:
    """The compile calls prepare(plain) makes, or (None, why) (module docstring)."""
    seen: list[Call] = []
    refused: list[str] = []
    classes = ClassState(plain)  # a prepare() that patches a class must not leave it patched for the runs
    try:
        with _watched(plain, seen, refused):
            prepare(plain)
    finally:
        classes.restore()
    if refused:
        return None, refused[0]
    return seen, ""


def replay(made: list[Call]) -> Callable:
    """prepare(model): `made`'s calls on a fresh plain model."""
    def prepare(model: torch.nn.Module) -> torch.nn.Module:
        modules = list(model.modules())
        parents = {id(child): (parent, name) for parent in modules for name, child in parent._modules.items()}
        root = model
        for call in made:
            target = [m for m in modules if type(m) is call.cls][call.index]
            kwargs = dict(call.kwargs)
            if call.kind == "Module.compile":
                target.compile(**kwargs)
            elif call.method:
                setattr(target, call.method, torch.compile(getattr(target, call.method), **kwargs))
            elif target is model:
                root = torch.compile(target, **kwargs)
            else:
                parent, name = parents[id(target)]
                setattr(parent, name, torch.compile(target, **kwargs))
        return root
    prepare.__qualname__ = "the baseline step under the run's compile calls"
    return prepare


def add_families(model_fn: Callable, runs: dict, fams: dict, expect: dict | None) -> dict:
    """{key: Run} of the families made for compiled runs without one (the
    module docstring); each such run of `runs` is replaced by a copy whose
    `against` names its family."""
    made: dict[tuple, str] = {}
    out: dict[str, Run] = {}
    for name, run in runs.items():
        if not isinstance(run, Run) or getattr(run, "against", None) is not None or run.prepare is None:
            continue
        try:
            found, why = calls(model_fn(), run.prepare)
        except Exception:  # its own training reports what prepare() raises
            continue
        if found is not None and not any(c.generates_code() for c in found):
            continue
        if found is None:
            _say(name, f"its prepare() makes a compile call that cannot be made again on the plain model ({why})")
            continue
        if len(families.twin_name(name)) + len("_rerun_99") > 63 or (
                name in (expect or {}) and len(families.graphs_twin(name)) > 31):
            _say(name, "its name leaves no room for its twins' names (docs/compile.md)")
            continue
        key = tuple(c.key() for c in found)
        if key not in made:
            made[key] = _free_key(set(fams) | set(out))
            out[made[key]] = Run(prepare=replay(found))
        runs[name] = copy.copy(run)  # the user's Run stays as given
        runs[name].against = made[key]
        print(f"ckpt_verify: run {name} is compiled with no family of its own: judged against "
              f"{families.family(made[key])}_<k>, the baseline step under the same compile call(s), and as "
              f"{families.twin_name(name)} against the eager baseline (docs/compile.md)", file=sys.stderr)
    return out


def _free_key(taken: set) -> str:
    key, k = "compiled", 2
    while key in taken or any(f"{other}_graphs" == key or f"{key}_graphs" == other for other in taken):
        key, k = f"compiled_{k}", k + 1
    return key


def _say(name: str, why: str) -> None:
    print(f"ckpt_verify: no compiled family for run {name}: {why}; it is judged against the eager baseline, "
          f"where the compiler's rounding cannot be told apart: pass baselines={{'compiled': Run(prepare=<the "
          f"plain model compiled the same way>)}} and Run(..., against='compiled') (docs/compile.md)",
          file=sys.stderr)
