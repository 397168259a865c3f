"""The JAX frontend: verifies a `jax.checkpoint` (jax.remat) the way the XLA
frontend verifies a torch_xla checkpoint, through the same recorder, the
same compiler evidence (xla_evidence.py) and the one C judge.

    report = verify_jax(init_fn, batch_fn, {"mine": loss_mine}, baseline=loss_plain, out="r.h5")

init_fn(key) -> params      a pytree of arrays (dicts, lists, tuples) from a PRNG key
batch_fn(step) -> batch     the batch of step 1..steps (made once, before any run)
loss_fn(params, batch)      a scalar loss; yours calls jax.checkpoint inside

Each run (two plain baselines, then each of yours) is one `jax.jit` of
forward, backward (`jax.value_and_grad`) and the SGD update, compiled for
that run alone (a fresh function each run, so no run takes another's
program from JAX's cache), trained `steps` steps from the same parameters
and batches. Losses, gradients and final parameters (numpy copies of the
JAX arrays; names from the pytree paths: `0.w1`) go to the one recorder.

The evidence: XLA_FLAGS=--xla_dump_to=<dir> --xla_dump_hlo_as_text, set
before JAX starts its CPU client, makes XLA write each compiled program
before and after optimization and its buffer assignment; the step program
of a run is the largest compiled while it trained. JAX marks a checkpoint's
replayed forward in each instruction's metadata itself (op_name
`.../checkpoint/rematted_computation/...`), so no tagging is needed here:
xla_evidence.mark_jax reads it. `regions` is the number of checkpoint
(remat) equations in the step's backward jaxpr. A baseline whose jaxpr has
one is refused (CheckpointInBaseline).

Runs in the JAX environment (scripts/python-jax: jax and jaxlib for the
CPU, numpy, h5py; no torch, docs/xla.md)."""
import atexit
import math
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import judge as judge_mod
from .. import xla_evidence
from ..errors import BadInput, BadRunName, CheckpointInBaseline, MissingFrontend, RunError
from ..recorder import Recorder, RunRecord
from ..report import Report

_state: dict = {"dump_dir": None, "seen": set(), "user_flags": ""}
# The primitive jax.checkpoint binds (`remat2` in jax 0.4.x-0.10; `checkpoint` is its name stack entry).
_REMAT_PRIMITIVES = frozenset({"remat2", "checkpoint", "remat"})
_VERDICTS = ("PASS", "NOISE", "FAIL", "MEMFAIL", "ERROR")
_WORD = re.compile(r"^[A-Za-z0-9_]{1,63}$")   # verify()'s: an HDF5 group and an entry of /case expect


def _backend_started() -> bool:
    if "jax" not in sys.modules:
        return False
    from jax._src import xla_bridge
    return bool(getattr(xla_bridge, "_backends", {}))


def start(dump_dir: str | None = None) -> str:
    """Points XLA's dump at a folder before JAX starts its client (XLA reads
    XLA_FLAGS once) and returns it; JAX_PLATFORMS defaults to cpu. A client
    already started without the dump cannot give evidence: BadInput."""
    if _state["dump_dir"]:
        return _state["dump_dir"]
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    flags = os.environ.get("XLA_FLAGS", "")
    _state["user_flags"] = " ".join(f for f in flags.split() if not f.startswith("--xla_dump"))
    if "--xla_dump_to=" in flags:
        dump_dir = flags.split("--xla_dump_to=")[1].split()[0]
        if "--xla_dump_hlo_as_text" not in flags:
            if _backend_started():
                raise BadInput("verify_jax: XLA_FLAGS has --xla_dump_to without --xla_dump_hlo_as_text and JAX's "
                               "client has started; add --xla_dump_hlo_as_text before the first JAX computation")
            os.environ["XLA_FLAGS"] = flags + " --xla_dump_hlo_as_text"
    else:
        if _backend_started():
            raise BadInput("verify_jax: JAX's client started before verify_jax could set XLA_FLAGS=--xla_dump_to=<dir> "
                           "--xla_dump_hlo_as_text; call ckpt_verify.frontends.jax.start() before the first JAX "
                           "computation, or set XLA_FLAGS yourself")
        if dump_dir is None:   # ours: removed at exit (set --xla_dump_to yourself to keep it)
            dump_dir = tempfile.mkdtemp(prefix="ckpt_verify.jax_dump.")
            atexit.register(shutil.rmtree, dump_dir, True)
        os.environ["XLA_FLAGS"] = (flags + f" --xla_dump_to={dump_dir} --xla_dump_hlo_as_text").strip()
    os.makedirs(dump_dir, exist_ok=True)
    _state["dump_dir"] = dump_dir
    return dump_dir


def leaves(tree: Any, prefix: str = "") -> dict:
    """{name: numpy array} of a pytree, named by its path (`0.w1`, `layers.2.b`)."""
    import jax
    out = {}
    for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
        parts = []
        for key in path:
            part = getattr(key, "key", getattr(key, "idx", getattr(key, "name", None)))
            parts.append(str(part if part is not None else key))
        name = ".".join(parts) or "value"
        if "/" in name:
            raise BadInput(f"pytree leaf {name!r}: a '/' in a name would make HDF5 groups of its parts "
                           f"(docs/schema.md); rename the key")
        out[prefix + name] = np.array(leaf)   # a host copy, the exact bits
    return out


def remat_equations(jaxpr: Any) -> int:
    """The checkpoint (remat) equations of a jaxpr, nested jaxprs (jit,
    custom rules) included, a remat's own body not."""
    count = 0
    for eqn in jaxpr.eqns:
        if eqn.primitive.name in _REMAT_PRIMITIVES:
            count += 1
            continue
        for value in eqn.params.values():
            for sub in value if isinstance(value, (tuple, list)) else (value,):
                inner = getattr(sub, "jaxpr", sub)
                if hasattr(inner, "eqns"):
                    count += remat_equations(inner)
    return count


class _Spec:
    def __init__(self, params: Any, batches: list, steps: int, lr: float):
        self.params, self.batches, self.steps, self.lr = params, batches, steps, lr


def _train(spec: _Spec, loss_fn: Callable, run_name: str, baseline: bool) -> RunRecord:
    """One run; its RunRecord with the compiler's evidence (xla.*)."""
    import jax
    record = RunRecord(run_name)
    dump = _state["dump_dir"]
    _state["seen"] |= set(xla_evidence.module_files(dump))

    def step(params, batch):   # a new function per run: JAX compiles it for this run alone
        loss, grads = jax.value_and_grad(loss_fn)(params, batch)
        return loss, grads, jax.tree_util.tree_map(lambda p, g: p - spec.lr * g, params, grads)

    step = jax.jit(step)
    params, step_ms = spec.params, []
    try:
        jaxpr = jax.make_jaxpr(jax.value_and_grad(loss_fn))(spec.params, spec.batches[0]).jaxpr
        regions = remat_equations(jaxpr)
        if baseline and regions:
            raise CheckpointInBaseline(f"run {run_name}: the baseline's jaxpr has {regions} checkpoint (remat) "
                                       f"equation(s): the plain step must not checkpoint")
        for k in range(1, spec.steps + 1):
            t0 = time.perf_counter()
            loss, grads, params = jax.block_until_ready(step(params, spec.batches[k - 1]))
            step_ms.append((time.perf_counter() - t0) * 1e3)
            loss = np.array(loss)
            if loss.shape != ():
                raise BadInput(f"run {run_name}: the loss is {loss.shape}, not a scalar")
            record.tensors[f"steps/{k}/loss"] = loss
            record.tensors.update(leaves(grads, f"steps/{k}/grads/"))
    except BadInput:
        raise
    except Exception as e:   # the user's loss_fn raised: the judge's ERROR
        import traceback
        err = RunError(f"run {run_name}: {type(e).__name__}: {e}")
        err.run, err.traceback = record, traceback.format_exc()
        raise err from e
    record.tensors.update(leaves(params, "final_params/"))
    # Step 1 compiles: the median is over the steps after it (step 1 alone when there is no other).
    record.attrs["timing.step_ms"] = statistics.median(step_ms[1:] or step_ms)
    record.attrs["timing.timed_steps"] = len(step_ms[1:] or step_ms)
    record.attrs["timing.steps"] = spec.steps
    new = sorted(set(xla_evidence.module_files(dump)) - _state["seen"])
    module = xla_evidence.step_module(dump, new)
    if module is None:
        record.attrs["xla.evidence"] = "none: no compiled step program found in the dump for this run"
        return record
    ev = xla_evidence.read_evidence(xla_evidence.module_files(dump)[module], regions, module, producer="jax")
    record.attrs.update(ev.attrs())
    record.attrs["memory.peak_bytes"] = ev.bytes.total
    return record


def _identical(a: RunRecord, b: RunRecord) -> bool:
    keys = list(a.tensors)
    return keys == list(b.tensors) and all(
        a.tensors[k].dtype == b.tensors[k].dtype and a.tensors[k].tobytes() == b.tensors[k].tobytes() for k in keys)


def _check(runs: dict, baseline: Any, expect: dict | None, steps: int, noise_runs: int, lr: float, seed: int,
           name: str, out: str | None) -> None:
    if not isinstance(runs, dict) or not runs:
        raise BadInput("runs must be a non-empty dict {name: loss_fn(params, batch) -> scalar}")
    for run, fn in runs.items():
        if not isinstance(run, str) or not _WORD.match(run) or run.startswith("baseline") or "_rerun_" in run:
            raise BadRunName(f"run {run!r}: a run name is 1-63 letters, digits or underscores, not baseline_* "
                             f"and without _rerun_")
        if not callable(fn):
            raise BadInput(f"run {run!r}: {type(fn).__name__} is not a loss_fn(params, batch)")
    if not callable(baseline):
        raise BadInput("baseline must be a loss_fn(params, batch) -> scalar, the plain step")
    for run, verdicts in (expect or {}).items():
        if run not in runs:
            raise BadInput(f"expect names run {run!r}, which is not in runs ({', '.join(runs)})")
        for v in str(verdicts).split("|"):
            if v not in _VERDICTS:
                raise BadInput(f"expect[{run!r}]: unknown verdict {v!r} (expected {', '.join(_VERDICTS)})")
    if not isinstance(steps, int) or steps < 1:
        raise BadInput(f"steps must be an integer >= 1, not {steps!r}")
    if not isinstance(noise_runs, int) or noise_runs < 0:
        raise BadInput(f"noise_runs must be an integer >= 0, not {noise_runs!r}")
    if not (isinstance(lr, (int, float)) and math.isfinite(lr) and lr > 0):
        raise BadInput(f"lr must be a finite number > 0, not {lr!r}")
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed < 2 ** 32:
        raise BadInput(f"seed must be an integer in [0, 2**32), not {seed!r}")
    if not _WORD.match(name):
        raise BadInput(f"name {name!r}: a case name is 1-63 letters, digits or underscores")
    if out is not None and not os.path.isdir(os.path.dirname(os.path.abspath(out))):
        raise BadInput(f"out {out!r}: directory {os.path.dirname(os.path.abspath(out))} does not exist")


def verify_jax(init_fn: Callable, batch_fn: Callable, runs: dict, *, baseline: Callable, steps: int = 2,
               seed: int = 0, lr: float = 0.01, out: str | None = None, expect: dict | None = None,
               noise_runs: int = 2, name: str | None = None, judge: str | None = None) -> Report:
    """Trains two plain baselines and every run from the same parameters
    (init_fn(PRNGKey(seed))) and batches, streams them into a schema-1
    report at `out` with XLA's evidence per run, and returns the C judge's
    verdicts. A run that differs from baseline_0 is re-run up to noise_runs
    times (JAX on the CPU is deterministic: one re-run shows it)."""
    name = name or (os.path.splitext(os.path.basename(out))[0].replace("-", "_").replace(".", "_") if out else "jax")
    _check(runs, baseline, expect, steps, noise_runs, lr, seed, name, out)
    try:
        import jax
    except ImportError as e:
        why = f"verify_jax needs jax: run it with scripts/python-jax (docs/xla.md; here: {e})"
        raise MissingFrontend(why) from None
    judge_path = judge_mod.find_judge(judge)
    start()
    params = init_fn(jax.random.PRNGKey(seed))
    batches = [batch_fn(k) for k in range(1, steps + 1)]
    spec = _Spec(params, batches, steps, lr)
    case_attrs = {"name": name, "steps": steps, "seed": seed, "noise_runs": noise_runs, "lr": float(lr),
                  "framework": f"jax {jax.__version__}, jaxlib {jax.lib.__version__} ({jax.default_backend()})",
                  "xla_device": str(jax.devices()[0]), "xla_flags": _state["user_flags"] or "(none)",
                  "model_definition": f"{getattr(init_fn, '__module__', '?')}."
                                      f"{getattr(init_fn, '__qualname__', repr(init_fn))} (user pytree, JAX)"}
    if expect:
        case_attrs["expect"] = ",".join(f"{run}:{v}" for run, v in expect.items())
    init = leaves(params)
    root = {"case": name, "producer": "ckpt_verify (python, jax)", "device": str(jax.devices()[0]),
            "dtype": str(next(iter(init.values())).dtype) if init else "float32", "seed": seed, "steps": steps,
            "memory_source": "XLA: memory.peak_bytes is the compiled step's buffer assignment ('Total bytes used')"}
    inputs = {}
    for k, batch in enumerate(batches, start=1):
        inputs.update(leaves(batch, f"{k}."))
    # Without out= the report lives in a temporary folder that goes with the Report.
    scratch = tempfile.mkdtemp(prefix="ckpt_verify.") if out is None else None
    out = out or os.path.join(scratch, f"{name}.h5")
    try:
        _record_all(spec, baseline, runs, noise_runs, out, root, case_attrs, inputs, init)
    except BaseException:
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)
        raise
    judge_dir = os.path.splitext(out)[0] + ".judge"
    os.makedirs(judge_dir, exist_ok=True)
    verdicts, code, table = judge_mod.judge(judge_path, out, judge_dir, name)
    verdicts = {run: verdicts[run] for run in [*runs, *verdicts] if run in verdicts}
    judge_mod.attach_tracebacks(verdicts, out)
    report = Report(out, judge_dir, verdicts, code, table, {}, root["memory_source"])
    if scratch:
        weakref.finalize(report, shutil.rmtree, scratch, True)
    return report


def _record_all(spec: _Spec, baseline: Callable, runs: dict, noise_runs: int, out: str, root: dict,
                case_attrs: dict, inputs: dict, init: dict) -> None:
    """Baselines (two, more when they differ), then each run (re-run while
    it differs from baseline_0, up to noise_runs times), into the report."""
    with Recorder.create(out, root, case_attrs, inputs, init) as recorder:
        first = _train(spec, baseline, "baseline_0", True)
        recorder.add(first)
        second = _train(spec, baseline, "baseline_1", True)
        recorder.add(second)
        if not _identical(first, second):
            for k in range(2, 2 + noise_runs):
                recorder.add(_train(spec, baseline, f"baseline_{k}", True))
        for run, fn in runs.items():
            record = _train_or_error(spec, fn, run)
            recorder.add(record)
            for k in range(1, noise_runs + 1):
                if "outcome" in record.attrs or _identical(first, record):
                    break
                record = _train_or_error(spec, fn, f"{run}_rerun_{k}")
                recorder.add(record)


def _train_or_error(spec: _Spec, fn: Callable, run: str) -> RunRecord:
    try:
        return _train(spec, fn, run, False)
    except RunError as e:
        e.run.attrs["outcome"] = "error"
        e.run.attrs["message"] = str(e)
        if e.traceback:
            e.run.attrs["traceback"] = e.traceback
        return e.run
