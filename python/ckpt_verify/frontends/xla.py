"""The XLA frontend: trains a user's torch model on torch_xla's device
(PJRT CPU by default) and streams each run to the recorder step by step,
with the compiler's evidence about the recompute beside its gradients.

A step on XLA is traced, not run: forward, backward and the SGD update
become one lazy graph, and `torch_xla.sync()` compiles it (once; later
steps hit torch_xla's cache) and runs it. XLA then sees the forward and the
backward's recompute in one program, and its CSE may merge them: right
gradients, no memory saved. What XLA did is read from its own dump
(XLA_FLAGS=--xla_dump_to=... --xla_dump_hlo_as_text, set here before the
PJRT client starts) by xla_evidence.py:

  - every op that runs as a recompute (an op run with grad mode on inside
    the autograd engine's backward, as probe.py defines it) is called from
    a function whose file name is `<ckptv_recompute_<region>>`; torch_xla
    records that Python frame on the op's IR node and, with XLA_HLO_DEBUG=1
    (set here), copies it into each HLO instruction's metadata
    (source_file), so the HLO says which instructions were a recompute and
    of which region (one unbroken burst of such ops);
  - the step program's instructions are counted before and after XLA's
    optimization, its opt-barriers and the values they hold classed, and
    its buffer assignment summed (memory.peak_bytes is XLA's "Total bytes
    used" for the compiled step; there is no live-byte meter on XLA).

Runs in the XLA environment (scripts/python-xla: torch 2.9 + torch_xla 2.9,
docs/stack.md)."""
import atexit
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from .. import xla_evidence
from ..errors import BadInput
from ..schema import storable
from . import eager

_state: dict = {"dump_dir": None, "graphs": {}, "seen": set(), "runs": 0, "baseline_hash": None}


def _dump_flags(dump_dir: str) -> str:
    return f"--xla_dump_to={dump_dir} --xla_dump_hlo_as_text"


def start(dump_dir: str | None = None) -> str:
    """Points XLA's dump at a folder before the PJRT client starts (XLA
    reads XLA_FLAGS once) and returns the folder. PJRT_DEVICE defaults to
    CPU. A client already started without the dump cannot give evidence:
    BadInput, naming the flag to set."""
    if _state["dump_dir"]:
        return _state["dump_dir"]
    os.environ.setdefault("PJRT_DEVICE", "CPU")
    # Source locations in the HLO metadata carry the recompute's tag;
    # torch_xla reads XLA_HLO_DEBUG when it is imported.
    if "torch_xla" in sys.modules and os.environ.get("XLA_HLO_DEBUG") != "1":
        raise BadInput("device='xla': torch_xla was imported without XLA_HLO_DEBUG=1, so XLA's HLO cannot say "
                       "which instructions are a recompute; set XLA_HLO_DEBUG=1 before importing torch_xla "
                       "(scripts/python-xla does)")
    os.environ["XLA_HLO_DEBUG"] = "1"
    flags = os.environ.get("XLA_FLAGS", "")
    _state["user_flags"] = " ".join(f for f in flags.split() if not f.startswith("--xla_dump"))
    if "--xla_dump_to=" in flags:
        dump_dir = flags.split("--xla_dump_to=")[1].split()[0]
        if "--xla_dump_hlo_as_text" not in flags:
            os.environ["XLA_FLAGS"] = flags + " --xla_dump_hlo_as_text"
    else:
        if _runtime_started():
            raise BadInput("device='xla': the PJRT client started before verify() could set "
                           "XLA_FLAGS=--xla_dump_to=<dir> --xla_dump_hlo_as_text; set it before the first XLA "
                           "tensor is made, or call ckpt_verify.frontends.xla.start() first")
        if dump_dir is None:   # ours: removed at exit (set --xla_dump_to yourself to keep it)
            dump_dir = tempfile.mkdtemp(prefix="ckpt_verify.xla_dump.")
            atexit.register(shutil.rmtree, dump_dir, True)
        os.environ["XLA_FLAGS"] = (flags + " " + _dump_flags(dump_dir)).strip()
    os.makedirs(dump_dir, exist_ok=True)
    _state["dump_dir"] = dump_dir
    return dump_dir


def _runtime_started() -> bool:
    import torch_xla
    probe = getattr(torch_xla._XLAC, "_xla_runtime_is_initialized", None)
    return bool(probe()) if probe else False


def user_flags() -> str:
    """XLA_FLAGS as the user set them, without the dump flags added here."""
    return _state.get("user_flags", "")


def version() -> str:
    import torch_xla
    return torch_xla.__version__


def device() -> torch.device:
    import torch_xla
    return torch_xla.device()


def _sync() -> None:
    import torch_xla
    torch_xla.sync()


def seed_all(seed: int, dev: torch.device) -> None:
    """The CPU generator and XLA's own RNG seed of the device."""
    import torch_xla.core.xla_model as xm
    eager.seed_all(seed)
    xm.set_rng_state(seed, device=str(dev))


class XlaMeter:
    """No live-byte meter on XLA: bytes come from the compiled step's
    buffer assignment (memory.peak_bytes), set per run from the dump."""
    source = None
    why = ("XLA: memory.peak_bytes is the compiled step's buffer assignment ('Total bytes used' in XLA's "
           "*-buffer-assignment.txt dump); no live-byte meter on XLA")

    def sync(self) -> None:
        pass


class RecomputeTagger(TorchDispatchMode):
    """Names the IR node of every op of the backward, so XLA's HLO metadata
    says what each instruction was: `ckptv_recompute_<k>/` for an op that
    ran as a recompute (grad mode on inside the engine's backward) in
    region k, a region being one unbroken burst of such ops, and
    `ckptv_backward_<k>/` for the backward ops that follow that burst (the
    region's own backward, which reads its incoming gradient). Numerics are
    untouched: every op runs as it would."""

    def __init__(self) -> None:
        super().__init__()
        self.in_backward = False
        self.region = 0
        self.bursting = False
        self.ops: dict = {}

    def backward_starts(self) -> None:
        self.in_backward = True
        self.bursting = False

    def backward_ends(self) -> None:
        self.in_backward = False

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        if not self.in_backward or not _on_xla((*args, *kwargs.values())):
            return func(*args, **kwargs)   # host-side work (an RNG state tensor) is not in XLA's program
        if torch.is_grad_enabled():
            if not self.bursting:
                self.region += 1
                self.bursting = True
            self.ops[self.region] = self.ops.get(self.region, 0) + 1
            return _caller(f"{xla_evidence.RECOMPUTE_TAG}{self.region}")(func, args, kwargs)
        if func.overloadpacket.__name__ in _BOOKKEEPING:
            return func(*args, **kwargs)
        self.bursting = False
        if self.region:
            return _caller(f"{xla_evidence.BACKWARD_TAG}{self.region}")(func, args, kwargs)
        return func(*args, **kwargs)


_callers: dict = {}


def _caller(tag: str) -> Callable:
    """A function whose code object's file name is `<tag>`: an op called
    through it gets that name as its IR node's source file, which XLA_HLO_DEBUG
    copies into each HLO instruction's metadata (source_file="<tag>")."""
    if tag not in _callers:
        namespace: dict = {}
        # func._op: the C++ operator itself, so that this frame, not
        # torch/_ops.py's, is the innermost Python frame torch_xla records.
        exec(compile("def call(func, args, kwargs):\n    return func._op(*args, **kwargs)\n", f"<{tag}>", "exec"),
             namespace)
        _callers[tag] = namespace["call"]
    return _callers[tag]


# Ops that move or relabel a value without computing: a recompute's
# saved-tensor hooks run them with grad mode off between its own ops, so
# they do not end a burst.
_BOOKKEEPING = frozenset({"detach", "detach_copy", "alias", "alias_copy", "_propagate_xla_data", "t", "t_copy",
                          "view", "view_copy", "lift_fresh", "lift_fresh_copy", "_to_copy", "clone"})


def _on_xla(out: Any) -> bool:
    if isinstance(out, torch.Tensor):
        return out.device.type == "xla"
    return isinstance(out, (tuple, list)) and any(_on_xla(o) for o in out)


def _module_names() -> set:
    return set(xla_evidence.module_files(_state["dump_dir"]))


def train(spec: eager.Spec, run: eager.Run, sink, baseline: bool = False) -> None:
    """One run on the XLA device, streamed into `sink` (a RunWriter or a
    RunRecord, as eager.train), with the compiler's evidence (xla.*) and
    XLA's bytes. A RunError leaves in the sink what was recorded so far."""
    _train(spec, run, sink, baseline)


def _update(params: list, lr: float) -> None:
    with torch.no_grad():
        for _, p in params:
            if p.grad is not None:
                p.add_(p.grad, alpha=-lr)


def _train(spec: eager.Spec, run: eager.Run, record, baseline: bool) -> None:
    import torch_xla
    run_name, step_fn = record.name, run.step
    before = _module_names() - _state["seen"]
    _state["seen"] |= before
    # The warm-up: a baseline's under the recompute probe (it must be plain).
    seed_all(spec.seed, spec.device)
    tagger = RecomputeTagger()
    if baseline:
        eager.warm_up(spec, run, run_name, watch=True)
        _sync()
    model, params, buffers = eager.prepared_model(spec, run, run_name)
    seed_all(spec.seed, spec.device)
    hooks = eager.HookCounts(params)
    fwd_ms, bwd_ms, graph_hash, salt = [], [], None, None
    _state["runs"] += 1
    step1_regions, step1_ops = 0, 0
    with tagger:
        for step in range(1, spec.steps + 1):
            batch = spec.batches[step - 1]
            for _, p in params:
                p.grad = None
            t0 = time.perf_counter()
            loss = eager._call(step_fn, model, batch, run_name, step)
            eager.check_loss(loss, run_name, step, step_fn)
            t1 = time.perf_counter()
            hooks.start_backward()
            grad = torch.ones_like(loss)   # made here: only the engine's work is backward
            tagger.backward_starts()
            try:
                eager._backward(loss, run_name, step, grad)
            finally:
                tagger.backward_ends()
            hooks.end_backward(params)
            grads = {name: p.grad for name, p in params if p.grad is not None}
            _update(params, spec.lr)
            if step == 1:
                step1_regions, step1_ops = tagger.region, sum(tagger.ops.values())
                live = [loss, *grads.values(), *(p for _, p in params)]
                graph_hash = torch_xla._XLAC._get_graph_hash(live)
            # torch_xla's graph hash does not tell a graph with a recompute
            # from the plain one (xla.graph_hash_as_baseline), so its cache
            # could run another run's program: a salt whose shape is this
            # run's number, in every step, gives each run its own program.
            salt = torch.zeros(_state["runs"], device=spec.device)
            _sync()   # compiles (first time) and runs forward + backward + update
            t2 = time.perf_counter()
            fwd_ms.append((t1 - t0) * 1e3)
            bwd_ms.append((t2 - t1) * 1e3)
            record.add(f"steps/{step}/loss", loss)
            for name, g in grads.items():
                record.add(f"steps/{step}/grads/{name}", g)
            for name, b in buffers:
                if not storable(b):
                    raise BadInput(f"run {run_name}: buffer {name} is {b.dtype}, which the report schema "
                                   f"cannot hold (docs/schema.md lists the types)")
                record.add(f"steps/{step}/buffers/{name}", b)
            del loss, grads
            spec.progress.step(run_name, step, spec.steps)
    for name, p in params:
        record.add(f"final_params/{name}", p)
    for path, t in hooks.record().items():
        record.add(path, t)
    record.attrs["timing.forward_ms"] = statistics.median(fwd_ms)
    record.attrs["timing.backward_ms"] = statistics.median(bwd_ms)
    record.attrs["timing.step_ms"] = statistics.median(f + b for f, b in zip(fwd_ms, bwd_ms))
    record.attrs["timing.timed_steps"] = len(fwd_ms)
    record.attrs["timing.steps"] = spec.steps
    del salt
    if record.name == "baseline_0":   # each verify() call's own reference
        _state["baseline_hash"] = graph_hash
    record.attrs["xla.graph_hash_as_baseline"] = int(not baseline and graph_hash == _state["baseline_hash"])
    # XLA's fused HLO ran this step: the rounding rule's twin is the same
    # HLO unfused (xla_twin.py, which sets 0 on its own runs).
    record.attrs["compile.codegen"] = 2
    _attach_evidence(record, graph_hash, step1_regions, step1_ops)


def _attach_evidence(record, graph_hash: bytes | None, regions: int, ops: int) -> None:
    """xla.* from the step program compiled in this run, or, when torch_xla
    took it from its cache, from the run that compiled the same graph."""
    new = sorted(_module_names() - _state["seen"])
    _state["seen"] |= set(new)
    module = xla_evidence.step_module(_state["dump_dir"], new)
    if module is not None:
        _state["graphs"][graph_hash] = module
    else:
        module = _state["graphs"].get(graph_hash)
    record.attrs["xla.recompute_torch_ops"] = ops
    if module is None:
        record.attrs["xla.evidence"] = "none: no compiled step program found in the dump for this graph"
        return
    files = xla_evidence.module_files(_state["dump_dir"])[module]
    ev = xla_evidence.read_evidence(files, regions, module)
    record.attrs.update(ev.attrs())
    record.attrs["memory.peak_bytes"] = ev.bytes.total
