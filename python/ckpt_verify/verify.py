"""verify(): the user's model and checkpoint against a plain baseline,
written as a schema-1 report and judged by `ckpt-verify judge`.
assert_verified(): the same, raising when a verdict is not the expected one.

Every argument the judge or the report would refuse is refused here, with
BadInput, before any training. The Report is a read-only mapping of run name
to verdict whose truth is `.ok`, so `assert verify(...)` is a real check."""
import gc
import importlib.util
import inspect
import math
import os
import re
import shutil
import sys
import tempfile
import traceback
import types
import weakref
from collections.abc import Callable, Mapping
from typing import Any

import torch

from . import compile_evidence, compile_family, families
from . import judge as judge_mod
from . import progress as progress_mod
from .adapters import Skipped
from .errors import (
    BadInput,
    BadRunName,
    JudgeError,
    MissingFrontend,
    ReportNotWritable,
    RunError,
    VerificationFailed,
)
from .estimate import check_fits
from .estimate import estimate as estimate_run
from .frontends import distributed
from .frontends.class_state import ClassState
from .frontends.eager import (
    Run,
    Spec,
    changed_batch,
    check_report_names,
    model_state,
    own_batches,
    seed_all,
    tensor_leaves,
    to_device,
)
from .frontends.eager import train as train_eager
from .frontends.memory_map import write_map
from .memory import NoMeter, meter_for
from .recorder import Recorder, RunWriter, check_same_tensors
from .report import Report
from .schema import attr_text

VERDICTS = ("PASS", "NOISE", "FAIL", "MEMFAIL", "ERROR")
_WORD = re.compile(r"^[A-Za-z0-9_]{1,63}$")


def default_baseline(model: torch.nn.Module, batch: Any) -> torch.Tensor:
    """The plain step when no `baseline=` is given: the model computes its
    own loss from the batch (model(*batch) for a tuple or list,
    model(**batch) for a dict, model(batch) otherwise). An output that
    carries the loss is reduced to it: a tensor `.loss` attribute (a
    transformers ModelOutput given labels) or a mapping's "loss" entry."""
    if isinstance(batch, (tuple, list)):
        args, kwargs, how = tuple(batch), {}, f"model(*batch) with the batch's {len(batch)} items"
    elif isinstance(batch, dict):
        args, kwargs, how = (), batch, f"model(**batch) with the batch's keys {', '.join(map(str, batch))}"
    else:
        args, kwargs, how = (batch,), {}, "model(batch)"
    _check_default_call(model, args, kwargs, how)
    return _loss_of(model(*args, **kwargs))


default_baseline.is_default_baseline = True  # check_loss names it in a NonScalarLoss


def _check_default_call(model: torch.nn.Module, args: tuple, kwargs: dict, how: str) -> None:
    """BadInput when the model's forward cannot take the batch the way the
    default baseline hands it over: the usual mistake is a model that does
    not compute its own loss given no baseline=, whose TypeError would
    otherwise name a call the user never wrote."""
    forward = getattr(model, "forward", None)
    try:
        signature = inspect.signature(forward)
    except (TypeError, ValueError):  # a forward Python cannot describe: let the call itself decide
        return
    try:
        signature.bind(*args, **kwargs)
    except TypeError as e:
        raise BadInput(f"no baseline= was given, so the default baseline called {how}, and "
                       f"{type(model).__name__}.forward{signature} cannot take that ({e}); a model that does not "
                       f"compute its own loss needs your plain step, e.g. baseline=lambda model, batch: "
                       f"F.mse_loss(model(batch[0]), batch[1])") from None


def _loss_of(out: Any) -> Any:
    """out itself when it is a tensor, else the tensor it carries as its
    loss (a mapping's "loss" entry, then a `.loss` attribute), else out
    (for check_loss to refuse, naming what it is)."""
    if isinstance(out, torch.Tensor):
        return out
    if isinstance(out, Mapping):
        loss = out.get("loss")
        if isinstance(loss, torch.Tensor):
            return loss
    loss = getattr(out, "loss", None)
    return loss if isinstance(loss, torch.Tensor) else out


def _check_name(name, what):
    if not isinstance(name, str) or not _WORD.match(name):
        raise BadRunName(f"{what} {name!r}: a run name is 1-63 letters, digits or underscores (it names an HDF5 "
                         f"group and an entry of /case expect)")
    if name.startswith("baseline_") or name == "baseline":
        raise BadRunName(f"{what} {name!r} clashes with the built-in baselines (baseline_0, baseline_1, ...): "
                         f"rename it")
    if "_rerun_" in name:
        raise BadRunName(f"{what} {name!r}: names with _rerun_ are reserved for re-runs of a run")


def _check_inputs(runs, expect, steps, noise_runs, device, out, name, baseline, tolerance, min_memory_saving,
                  seed, lr, min_held_cut=None):
    if not isinstance(runs, dict) or not runs:
        raise BadInput("runs must be a non-empty dict {name: step_fn(model, batch) -> loss}")
    for run, fn in runs.items():
        _check_name(run, "run")
        if not (callable(fn) or isinstance(fn, (Skipped, Run))):
            raise BadInput(f"run {run!r}: {type(fn).__name__} is not a step_fn(model, batch) -> loss, a "
                           f"Run(prepare=..., step=...) or a Skipped(reason)")
    if baseline is not None and not callable(baseline):
        raise BadInput("baseline must be a step_fn(model, batch) -> loss")
    if not _WORD.match(name or ""):
        raise BadInput(f"name {name!r}: a case name is 1-63 letters, digits or underscores")
    if expect is not None and not isinstance(expect, Mapping):
        raise BadInput(f"expect= is a {type(expect).__name__}, not a mapping {{run: 'FAIL' or 'FAIL|MEMFAIL'}}")
    for run, verdicts in (expect or {}).items():
        if run not in runs:
            raise BadInput(f"expect names run {run!r}, which is not in runs ({', '.join(runs)})")
        for v in str(verdicts).split("|"):
            if v not in VERDICTS:
                raise BadInput(f"expect[{run!r}]: unknown verdict {v!r} (expected {', '.join(VERDICTS)}, joined by |)")
    if not isinstance(steps, int) or steps < 1:
        raise BadInput(f"steps must be an integer >= 1, not {steps!r}")
    if not isinstance(noise_runs, int) or noise_runs < 0:
        raise BadInput(f"noise_runs must be an integer >= 0, not {noise_runs!r}")
    for key, value in (("tolerance", tolerance), ("min_memory_saving", min_memory_saving),
                       ("min_held_cut", min_held_cut)):
        if value is not None and not (_is_number(value) and math.isfinite(value) and value >= 0):
            raise BadInput(f"{key} must be a finite number >= 0, not {value!r}")
    for key, value in (("min_memory_saving", min_memory_saving), ("min_held_cut", min_held_cut)):
        if value is not None and value > 1:
            raise BadInput(f"{key} is a fraction 0..1 of the baseline's bytes, not {value!r}")
    if not (_is_number(lr) and math.isfinite(lr) and lr > 0):
        raise BadInput(f"lr must be a finite number > 0, not {lr!r}")
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed < 2**63:
        raise BadInput(f"seed must be an integer in [0, 2**63), not {seed!r}")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as e:
        raise BadInput(f"device {device!r}: {e}") from e
    if dev.type == "xla":
        # Looked up, not imported: frontends/xla.py sets XLA_HLO_DEBUG before torch_xla is imported.
        if importlib.util.find_spec("torch_xla") is None:
            raise MissingFrontend(f"device={device!r} needs torch_xla: run it with scripts/python-xla "
                                  f"(docs/xla.md; this Python, {sys.executable}, has no torch_xla)")
        xla = _xla()
        xla.start()
        dev = xla.device()
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise BadInput(f"device {device!r}: torch here has no CUDA device")
    if out is not None:
        # Missing directories above out are made as the report is opened
        # (make_parents); one that is a file is refused now, before training.
        parent = os.path.dirname(os.path.abspath(out))
        while not os.path.isdir(parent):
            if os.path.exists(parent):
                raise BadInput(f"out {out!r}: {parent} exists and is not a directory")
            parent = os.path.dirname(parent)
        if os.path.isdir(out):
            raise BadInput(f"out {out!r} is a directory; give the report's file name (for example {out}/report.h5)")
    return dev


def make_parents(out: str) -> list[str]:
    """Creates the directories above the report file `out` that do not
    exist, as the ckpt-verify binary creates its --out directory (every
    missing component, mode 0777 less the umask). Returns those it
    created, deepest last, so that a run that writes nothing can remove
    them. OSError naming the directory when one cannot be created (a
    component that is a file, a read-only parent)."""
    parent = os.path.dirname(os.path.abspath(out))
    missing = []
    while parent and not os.path.isdir(parent):
        if os.path.exists(parent):
            raise OSError(f"{parent}: exists and is not a directory")
        missing.append(parent)
        parent = os.path.dirname(parent)
    made = []
    for path in reversed(missing):
        try:
            os.mkdir(path, 0o777)
        except FileExistsError:
            continue
        except OSError as e:
            remove_dirs(made)
            raise OSError(f"{path}: cannot create directory: {e.strerror}") from e
        made.append(path)
    return made


def remove_dirs(made: list[str]) -> None:
    """Removes the directories make_parents() made, deepest first, each only while empty."""
    for path in reversed(made):
        try:
            os.rmdir(path)  # only while empty: nothing of anyone's is removed
        except OSError:
            pass


def _user_call(fn: Callable, what: str, *args: Any) -> Any:
    """fn(*args) for a function of the user's called before any run
    (batch_fn, model_fn): one that raises is BadInput naming it, with the
    traceback kept on the exception (`python -m ckpt_verify --verbose`)."""
    try:
        return fn(*args)
    except Exception as e:
        call = f"{what}({', '.join(map(repr, args))})"
        err = BadInput(f"{call} raised {type(e).__name__}: {e}")
        err.traceback = "".join(traceback.format_exception(type(e), e, e.__traceback__))
        raise err from e


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _baseline_name(k):
    return f"baseline_{k}"


StepFn = Callable[[torch.nn.Module, Any], torch.Tensor]


def verify(model_fn: Callable[[], torch.nn.Module], batch_fn: Callable[[int], Any],
           runs: dict[str, StepFn | Run | Skipped], *, baseline: StepFn | None = None, steps: int = 2,
           seed: int = 0, device: str | torch.device = "cpu", out: str | None = None,
           expect: dict[str, str] | None = None, lr: float = 0.01, tolerance: float | None = None,
           min_memory_saving: float | None = None, min_held_cut: float | None = None, noise_runs: int = 4,
           name: str | None = None,
           judge: str | None = None, model_definition: str | None = None, world_size: int | None = None,
           parallel: str = "ddp", backend: str = "gloo", parallel_options: dict | None = None,
           timeout: float | None = None, against_single: bool = True,
           baselines: dict[str, StepFn | Run] | None = None, require_memory: bool = False) -> "Report":
    """Trains a plain baseline and every run in `runs` from the same seeded
    model and batches, streams them into a schema-1 report at `out` and
    returns the C judge's verdicts (a Report).

    model_fn()            builds a fresh plain model (CPU or `device`; moved to `device`)
    batch_fn(step)        the batch of step 1..steps (made once, seeded, before any run)
    runs                  {name: run}, a run being
                            step_fn(model, batch) -> scalar loss, your checkpoint inside;
                            Run(prepare=fn, step=None): prepare(model) applies your checkpoint
                              to each freshly built model (e.g. gradient_checkpointing_enable),
                              step defaults to the baseline's;
                            adapters.Skipped(reason): reported, not run
    baseline              the plain step_fn; default model(batch) (see default_baseline). It is
                          proven plain: a baseline that recomputes is refused
                          (CheckpointInBaseline), so a checkpoint applied inside model_fn
                          cannot check itself
    expect                {name: "FAIL" or "FAIL|MEMFAIL"} for runs expected not to pass
    memory                judged by default for every run (a Run(memory=None) is a plain
                          control run): bytes held at the end of forward against the
                          statement drawn from the baseline's memory map and the run's own
                          recompute (docs/memory.md, "A user's checkpoint"). Explicit
                          requirements on top: min_held_cut (the cut in bytes held at the
                          end of forward, a fraction 0..1 of baseline_0's) and
                          min_memory_saving (the cut in peak bytes, a fraction 0..1)
    world_size            None: one process. N: every run (a step_fn, Run or
                          frontends.distributed.DistRun) is trained by N ranks of
                          torch.distributed (`parallel` "ddp", "fsdp" or "fsdp2" over
                          `backend`, each rank batch_size / N rows) and judged against
                          plain distributed runs (bitwise) and, with against_single,
                          against the single-process baselines (NOISE at best);
                          a rank that fails, dies or outlasts `timeout` seconds is an
                          ERROR naming it (docs/distributed.md)
    require_memory        True: a run whose memory cannot be judged (no meter, no memory map)
                          is ERROR, naming why; by default its verdict line says
                          "memory not judged: <why>" and summary.json carries it
    baselines             {family: step_fn or Run}: more plain baselines, each trained as
                          <family>_baseline_0, _1 (e.g. {"compiled": the plain step under
                          torch.compile}); a Run(..., against=family) is judged against its
                          family and, as <run>_vs_eager, against the eager baseline (NOISE at
                          best) (docs/compile.md)
    """
    name = name or (os.path.splitext(os.path.basename(out))[0].replace("-", "_").replace(".", "_") if out
                    else "external")
    dev = _check_inputs(runs, expect, steps, noise_runs, device, out, name, baseline, tolerance,
                        min_memory_saving, seed, lr, min_held_cut)
    if not isinstance(require_memory, bool):
        raise BadInput(f"require_memory must be True or False, not {require_memory!r}")
    baseline = Run(step=baseline or default_baseline)
    fams = families.check(baselines, runs, expect)
    if fams and world_size is not None:
        raise BadInput("baselines= with world_size: a family of baselines is trained in one process")
    # The _vs_eager twins take no expectation from their runs: the judge does
    # not judge a twin whose run's own verdict is not PASS or NOISE (twin_of,
    # judge.c), and a twin against eager can claim NOISE at best.
    runs = {run: (fn if isinstance(fn, (Run, Skipped)) else Run(step=fn)) for run, fn in runs.items()}
    if world_size is None and dev.type != "xla":
        # A compiled run with no family: the baseline step under its compile calls (compile_family.py).
        fams.update(compile_family.add_families(model_fn, runs, fams, expect))
    for fn in [*runs.values(), *fams.values()]:
        if isinstance(fn, Run) and fn.step is None:
            fn.step = baseline.step
    judge_path = judge_mod.find_judge(judge)
    meter = _xla().XlaMeter() if dev.type == "xla" else meter_for(dev, judge_path)
    for key, value in (("min_memory_saving", min_memory_saving), ("min_held_cut", min_held_cut)):
        if value is not None and isinstance(meter, NoMeter):
            raise BadInput(f"{key} is set but memory cannot be measured: {meter.why}")

    # The batches, made once, before any run: no run's RNG stream depends on
    # them. Each run trains on its own copy of them (frontends/eager.py own_batches).
    seed_all(seed)
    batches = [to_device(_user_call(batch_fn, "batch_fn", k), dev) for k in range(1, steps + 1)]
    seed_all(seed)
    cfg = None
    if world_size is not None and dev.type == "xla":
        raise BadInput("world_size with device='xla': the XLA frontend trains in one process (docs/xla.md)")
    if world_size is not None:
        timeout = distributed.DEFAULT_TIMEOUT if timeout is None else timeout
        distributed.check_config(world_size, parallel, backend, parallel_options, timeout, batches, dev)
        cfg = distributed.Config(world_size, parallel, backend, parallel_options, timeout)
        # The _vs_single twins' names are checked here; they take no
        # expectation from their runs (the judge does not judge a twin whose
        # run's own verdict is not PASS or NOISE: twin_of, judge.c).
        distributed.twin_names([r for r, fn in runs.items() if not isinstance(fn, Skipped)], against_single)
    first = _user_call(model_fn, "model_fn")
    if not isinstance(first, torch.nn.Module):
        raise BadInput(f"model_fn returned {type(first).__name__}, not a torch.nn.Module")
    check_report_names(first)
    n_runs = sum(not isinstance(fn, Skipped) for fn in runs.values())
    est = estimate_run(first, steps, n_runs, noise_runs, dev)
    check_fits(est, held=est.param_bytes + est.buffer_bytes)
    reference = model_state(first)
    params_init = dict(first.named_parameters())  # written as the report opens, then let go
    described = model_definition or describe_model(first, model_fn)
    progress = progress_mod.for_stderr(runs_hint=est.runs_best)
    progress.note(est.line())
    spec = Spec(model_fn, batches, steps, seed, lr, dev, meter, reference, progress)
    spec.require_memory = require_memory
    spec.dropout_modules = distributed.dropout_modules(first)
    spec.classes = ClassState(first)  # every run starts from these classes (frontends/class_state.py)

    framework = f"pytorch {torch.__version__}"
    if dev.type == "xla":
        framework += f", torch_xla {_xla().version()} (PJRT {os.environ.get('PJRT_DEVICE', '?')})"
    case_attrs = {"name": name, "steps": steps, "seed": seed, "noise_runs": noise_runs, "lr": float(lr),
                  "framework": framework, "device": str(dev), "model_definition": described}
    if dev.type == "xla":
        # /case device is the harness's key (cpu, cuda:N); an XLA device is
        # the producer's own, kept as xla_device (and in the root's device).
        case_attrs["xla_device"] = case_attrs.pop("device")
        case_attrs["xla_flags"] = _xla().user_flags() or "(none)"
    if tolerance is not None:
        case_attrs["tolerance"] = float(tolerance)
    if min_memory_saving is not None:
        case_attrs["min_memory_saving"] = float(min_memory_saving)
    if min_held_cut is not None:
        case_attrs["min_held_cut"] = float(min_held_cut)
    if cfg is not None:
        case_attrs.update({"world_size": world_size, "parallel": parallel, "backend": backend})
    skipped = {run: fn.reason for run, fn in runs.items() if isinstance(fn, Skipped)}
    judged_expect = {run: v for run, v in (expect or {}).items() if run not in skipped}
    if judged_expect:  # a skipped run is not in the file: nothing to expect of it
        case_attrs["expect"] = ",".join(f"{run}:{v}" for run, v in judged_expect.items())
    if skipped:
        case_attrs["skipped"] = "; ".join(f"{run}: {why}" for run, why in skipped.items())
    # The runs a complete report holds: the judge makes any it lacks an ERROR.
    case_attrs["runs"] = ",".join(run for run in runs if run not in skipped)
    first_param = next(iter(params_init.values()), None)
    dtype = str(first_param.dtype).replace("torch.", "") if first_param is not None else "float32"
    root = {"case": name, "producer": "ckpt_verify (python)", "libtorch_version": torch.__version__,
            "device": str(dev), "dtype": dtype, "seed": seed, "steps": steps, "threads": torch.get_num_threads(),
            "memory_source": meter.source or meter.why}
    inputs = {}
    for k, batch in enumerate(batches, start=1):
        inputs.update(tensor_leaves(batch, str(k)))

    # Without out= the report lives in a temporary folder that goes with the
    # Report (or the process): pass out= (pytest: tmp_path / "r.h5") to keep it.
    scratch = tempfile.mkdtemp(prefix="ckpt_verify.") if out is None else None
    if scratch:
        out = os.path.join(scratch, f"{name}.h5")
    made = []  # the directories above out made for it, removed again if nothing is written
    try:
        try:
            made = make_parents(out)
        except OSError as e:
            raise ReportNotWritable(f"out {out!r}: {e}") from e
        with Recorder.create(out, root, case_attrs, inputs, params_init) as recorder:
            del first, params_init, first_param  # in the report now: the training needs its memory
            try:
                _train_all(spec, baseline, runs, noise_runs, recorder, cfg, against_single, fams)
            finally:
                progress.close()
        judge_dir = os.path.splitext(out)[0] + ".judge"
        os.makedirs(judge_dir, exist_ok=True)
        verdicts, code, table = judge_mod.judge(judge_path, out, judge_dir, name)
    except JudgeError:
        raise  # the complete report is kept, and the error names it
    except BaseException:
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)
        remove_dirs(made)
        raise
    # In the order the runs were given (the judge lists them its own way).
    verdicts = {run: verdicts[run] for run in [*runs, *verdicts] if run in verdicts}
    judge_mod.attach_tracebacks(verdicts, out)
    report = Report(out, judge_dir, verdicts, code, table, skipped, meter.source or meter.why, est)
    if scratch:
        weakref.finalize(report, shutil.rmtree, scratch, True)
    return report


def _train_all(spec, baseline, runs, noise_runs, recorder, cfg=None, against_single=True, fams=None):
    """Baselines: two, and up to 2 + noise_runs when they differ (the
    judge's noise envelope). Runs: each once; one that differs from
    baseline_0 is re-run up to noise_runs times, until a re-run reproduces
    baseline_0. Each run streams into the report as it trains; whether it
    is bitwise baseline_0 is what its writer found while writing
    (RunWriter.identical), so no run is kept in memory to compare."""
    # What lives before the training is frozen out of the collector: the
    # gc.collect() before each measured step (its live bytes) then scans
    # only what the training made, not all of torch's modules (0.2 s each).
    gc.collect()
    gc.freeze()
    try:
        _train_runs(spec, baseline, runs, noise_runs, recorder, cfg, against_single, fams or {})
    finally:
        gc.unfreeze()


def _train_runs(spec, baseline, runs, noise_runs, recorder, cfg, against_single, fams):
    train = _frontend_train(spec.device)
    _train_baseline(spec, baseline, 0, recorder, train)
    second = _train_baseline(spec, baseline, 1, recorder, train)
    if "map" in spec.baseline_memory:  # every run's memory statement is drawn from it
        write_map(recorder.file, spec.baseline_memory["map"], _baseline_name(1),
                  "step 1 (recorded)" if "steps" in spec.baseline_memory else "an unrecorded eager step, batch 1")
    check_same_tensors(recorder, _baseline_name(0), _baseline_name(1))
    singles = [_baseline_name(0), _baseline_name(1)]
    if not second.identical:
        for k in range(2, 2 + noise_runs):
            _train_baseline(spec, baseline, k, recorder, train)
            check_same_tensors(recorder, _baseline_name(0), _baseline_name(k))
            singles.append(_baseline_name(k))
    if cfg is not None:  # the runs are trained by ranks (frontends/distributed.py)
        skipped = {run for run, fn in runs.items() if isinstance(fn, Skipped)}
        distributed.train_all(spec, cfg, baseline, runs, noise_runs, recorder, singles, against_single, skipped)
        return
    fam_names = {key: families.train_family(spec, key, fam, noise_runs, recorder, train) for key, fam in fams.items()}
    # Inductor's kernels: the same families with its graphs run op by op (the rounding rule, families.py).
    codegen = {key for key, names in fam_names.items() if families.ran_codegen(recorder, names[0])}
    for key in codegen:
        families.train_family(spec, key, fams[key], noise_runs, recorder, train, graphs=True)
    samples = {key: {} for key in fams}
    differing = []  # runs against baseline_0 that differ from it (XLA's twins)
    for run_name, run in runs.items():
        if isinstance(run, Skipped):
            continue
        against = getattr(run, "against", None)
        fam = families.family(against) if against else None
        writer = _train_or_error(spec, run, run_name, recorder, train, fam)
        names = [run_name]
        for k in range(1, noise_runs + 1):
            if "outcome" in writer.attrs or writer.identical:
                break
            writer = _train_or_error(spec, run, f"{run_name}_rerun_{k}", recorder, train, fam)
            names.append(f"{run_name}_rerun_{k}")
        if against:
            samples[against][run_name] = names
        elif "outcome" not in writer.attrs and not writer.identical:
            differing.append(run_name)
        if against in codegen and families.ran_codegen(recorder, run_name):
            with compile_evidence.graphs_without_codegen():
                _train_or_error(spec, run, families.graphs_twin(run_name), recorder, train,
                                families.graphs_family(against))
            _expect_of_twin(recorder, run_name, families.graphs_twin(run_name))
    for key in fams:  # the _vs_eager twins (families.py)
        families.link_twins(recorder, key, singles, fam_names[key], samples[key])
    if spec.device.type == "xla":
        _train_unfused_twins(spec, baseline, runs, differing, noise_runs, recorder)


def _train_unfused_twins(spec, baseline, runs, differing, noise_runs, recorder):
    """XLA: each run that completed and differs from baseline_0 gets its
    twin, the same HLO without XLA's fusion (the rounding rule,
    frontends/xla_twin.py); a run bitwise to baseline_0 needs none."""
    if not differing:
        return
    from .frontends import xla_twin
    expect = recorder.file["case"].attrs.get("expect")
    expected = {item.rsplit(":", 1)[0] for item in attr_text(expect).split(",")} if expect else set()
    chosen = {}
    for name in differing:
        why = (f"run {xla_twin.twin(name)!r} exists" if xla_twin.twin(name) in runs else
               "its name and _graphs exceed /case expect's 31 characters" if name in expected
               and len(xla_twin.twin(name)) > 31 else
               "its name and _graphs exceed a run name's 63 characters" if len(xla_twin.twin(name)) > 63 else None)
        if why:
            print(f"ckpt_verify: no unfused XLA twin for run {name}: {why}; its FAIL, if any, stands (docs/xla.md)",
                  file=sys.stderr)
        else:
            chosen[name] = runs[name]
    if not chosen:
        return
    made = xla_twin.train_twins(spec, baseline, chosen, noise_runs, recorder, _xla().user_flags())
    for name in differing:
        if xla_twin.twin(name) in made:
            _expect_of_twin(recorder, name, xla_twin.twin(name))


def _expect_of_twin(recorder: Recorder, run_name: str, twin: str) -> None:
    """/case expect gains `twin` with run_name's expectation, if it has one
    (a twin made while training: /case names only what a report holds)."""
    case = recorder.file["case"]
    expect = case.attrs.get("expect")
    expect = expect.decode() if isinstance(expect, bytes) else expect
    if not expect:
        return
    verdicts = dict(item.rsplit(":", 1) for item in str(expect).split(","))
    if run_name in verdicts:
        case.attrs["expect"] = f"{expect},{twin}:{verdicts[run_name]}"


def _changed_batches(before: dict, own: Spec, run_name: str) -> str | None:
    """The message for a run that changed its copy of the batches in place
    (their checksums before and after the run), or None."""
    what = changed_batch(before, own.batches)
    return None if what is None else (
        f"run {run_name} changed {what}: a step must leave its batch as it found it (a training loop that "
        f"reuses the batch, for gradient accumulation or a retry, would train on the changed one; each run "
        f"here had its own copy, so no other run saw the change)")


def _train_baseline(spec: Spec, baseline: Run, k: int, recorder: Recorder, train: Callable) -> RunWriter:
    """A baseline streamed into the report; one that raises is removed from
    it and stops verify() (RunError: the whole report is abandoned), and so
    does one that changes its batches in place (BadInput: every run would
    be compared on an input that the plain step itself does not keep)."""
    writer = recorder.begin_run(_baseline_name(k))
    own, before = own_batches(spec)
    try:
        families.train_with_evidence(train, own, baseline, writer, baseline=True)
        families.refuse_class_patches(writer)
        changed = _changed_batches(before, own, _baseline_name(k))
        if changed:
            raise BadInput(f"the plain baseline changes its batch: {changed}")
    except BaseException:
        writer.abort()
        raise
    writer.finish()
    return writer


def _xla() -> types.ModuleType:
    """frontends/xla.py, imported only for an XLA device (it needs torch_xla)."""
    from .frontends import xla
    return xla


def _frontend_train(dev: torch.device) -> Callable:
    """The frontend that trains on `dev`: torch_xla's for an XLA device
    (frontends/xla.py), eager otherwise."""
    return _xla().train if dev.type == "xla" else train_eager


def _train_or_error(spec: Spec, run: Run, run_name: str, recorder: Recorder,
                    train: Callable | None = None, family: str | None = None) -> RunWriter:
    """A run streamed into the report, trained on its own copy of the
    batches, against `family`'s baselines when given. One whose prepare,
    step_fn or backward raised (RunError) is kept as it stands, what it
    wrote before it raised, with outcome=error, its message and its
    traceback: the judge's ERROR verdict, as for a harness run (the
    traceback's last frames go to stderr). So is one that changed its
    batches in place (their CRC-32 before and after): "run X changed batch
    1 in place (inputs/1/0): ...". Any other exception removes the run from
    the file before it propagates, so no run is left half-written."""
    writer = recorder.begin_run(run_name, family)
    own, before = own_batches(spec)
    try:
        families.train_with_evidence(train or train_eager, own, run, writer, measure=family is not None)
    except RunError as e:
        writer.attrs["outcome"] = "error"
        writer.attrs["message"] = str(e)
        if e.traceback:
            writer.attrs["traceback"] = e.traceback
            print(f"ckpt_verify: {e}\n{_last_frames(e.traceback)}", file=sys.stderr)
    except BaseException:
        writer.abort()
        raise
    unjudged = attr_text(writer.attrs.get("memory_statement", ""))
    if getattr(spec, "require_memory", False) and "outcome" not in writer.attrs and unjudged.startswith("not judged: "):
        writer.attrs["outcome"] = "error"
        writer.attrs["message"] = f"memory {unjudged} (verify(require_memory=True))"
    changed = _changed_batches(before, own, run_name)
    if changed:  # judged ERROR with this message; a run that raised says so first
        writer.attrs["message"] = f"{writer.attrs['message']}; {changed}" if "outcome" in writer.attrs else changed
        writer.attrs["outcome"] = "error"
    writer.finish()
    return writer


def _last_frames(text, frames=3):
    """The last `frames` frames of a formatted traceback and its error line."""
    lines = text.rstrip("\n").split("\n")
    starts = [i for i, line in enumerate(lines) if line.startswith("  File ")]
    begin = starts[-frames] if len(starts) >= frames else (starts[0] if starts else 0)
    return "\n".join(lines[begin:])


def describe_model(model: torch.nn.Module, model_fn: Callable) -> str:
    """What the report says the model is: its class, parameter count and
    dtype, and the function that built it."""
    params = list(model.parameters())
    count = sum(p.numel() for p in params)
    dtypes = sorted({str(p.dtype).replace("torch.", "") for p in params}) or ["none"]
    cls = type(model)
    builder = f"{getattr(model_fn, '__module__', None) or '?'}.{getattr(model_fn, '__qualname__', repr(model_fn))}"
    return (f"{cls.__module__}.{cls.__qualname__}: {count} parameters in {len(params)} tensors, "
            f"dtype {'/'.join(dtypes)}; built by {builder} (user model)")


def assert_verified(*args: Any, **kwargs: Any) -> "Report":
    """verify(), then raise VerificationFailed (an AssertionError) naming
    every run whose verdict is not the expected one. Returns the Report."""
    report = verify(*args, **kwargs)
    bad = report.unexpected()
    if bad:
        raise VerificationFailed("unexpected verdicts:\n" + "\n".join(
            f"  {v.run}: {v.verdict}: {v.reason}" for v in bad) + f"\nreport: {report.path}")
    return report
