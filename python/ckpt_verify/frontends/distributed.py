"""The distributed frontend: a run trained by `world_size` ranks of
torch.distributed on this machine (gloo over 127.0.0.1; NCCL on GPUs), with
DDP, FSDP (FullyShardedDataParallel) or FSDP2 (fully_shard), each rank a
process forked from this one (so the user's functions, closures included,
reach the ranks as they are). frontends/distributed_rank.py is what a rank
does; this module starts the ranks, watches them, and turns what they
saved into one RunRecord:

    steps/<k>/loss, steps/<k>/grads/<name>, final_params/<name>
        the global view the judge compares: the mean of the ranks' losses,
        the full gradients (FSDP: gathered from the shards), parameters
    ranks/<r>/steps/<k>/loss, ranks/<r>/steps/<k>/grads/<name>
        what rank r held: its local loss and its gradients (DDP: the
        averaged full gradient; FSDP/FSDP2: its shard), judged too
    ranks/<r>/memory, ranks/<r>/timing, ranks/<r>/collectives   its figures
    memory, timing                 the largest figure over the ranks

A launch that does not end well is an ERROR run, never a hang: a rank that
raises (DDP's "Expected to mark a variable ready only once" included) gives
its message, and of several, the one that raised first is named first (the
others' gloo errors, a peer lost, follow from it); a rank that dies gives
its signal or exit status and its last progress message, before any other;
when `timeout` seconds pass first, every rank still running is named with
its last message. Then the ranks' process group is killed (SIGKILL), so
nothing is left behind. A run whose step changed its batch in place (each
rank trains on its own copy, checksummed before and after) is an ERROR
naming the batch, the tensor and the rank.

verify(world_size=N, parallel=...) calls train_all(), which adds to the
single-process baselines (baseline_0, baseline_1, the same global batches
in one process) the families the judge needs (docs/distributed.md):

    <parallel>_baseline_<k>       the plain model, distributed, world N
    <run>                         judged against <parallel>_baseline: bitwise
    <parallel>_or_single_baseline_<k>   baseline_0, baseline_1 and the plain
                                  distributed runs, without ranks/ (hard links)
    <run>_vs_single               <run> without ranks/, judged against that
                                  family: NOISE within what distribution itself
                                  does to the numbers, FAIL beyond"""
import multiprocessing
import multiprocessing.connection
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Callable

import torch
import torch.distributed as dist

from ..errors import BadInput, BadRunName, RunError
from ..recorder import RunRecord, check_same_tensors, link_run, same_results
from . import memory_map
from .distributed_rank import rank_context, rank_main  # noqa: F401 - rank_context is public API
from .eager import Run

PARALLELS = ("ddp", "fsdp", "fsdp2")
BACKENDS = ("gloo", "nccl")
DEFAULT_TIMEOUT = 120.0  # seconds for one launch: tiny models train in a few seconds
GRACE = 3.0  # seconds the other ranks get to report after one rank failed


class DistRun(Run):
    """A distributed run: Run's prepare and step, plus what the parallel
    wrapper needs.

    prepare(model)       applied to the plain model before wrapping (e.g.
                         checkpoint_wrapper on blocks before fully_shard)
    options              keyword arguments for this run's wrapper, over
                         verify()'s parallel_options (find_unused_parameters,
                         static_graph, auto_wrap_policy, ...)
    wrap(model)          wraps the model itself, instead of `parallel` (a
                         planted wrong wrap order)
    after_wrap(model)    applied to the wrapped model (FSDP's
                         apply_activation_checkpointing after wrapping)"""

    def __init__(self, prepare: Callable | None = None, step: Callable | None = None, *, options: dict | None = None,
                 wrap: Callable | None = None, after_wrap: Callable | None = None, memory: str | None = "judged"):
        self.prepare, self.step, self.memory = prepare, step, memory
        self.options, self.wrap, self.after_wrap = dict(options or {}), wrap, after_wrap
        for what, fn in (("prepare", prepare), ("step", step), ("wrap", wrap), ("after_wrap", after_wrap)):
            if fn is not None and not callable(fn):
                raise BadInput(f"DistRun({what}=...): {type(fn).__name__} is not callable")


def as_dist_run(run: Run) -> DistRun:
    if isinstance(run, DistRun):
        return run
    return DistRun(prepare=run.prepare, step=run.step, memory=getattr(run, "memory", "judged"))


class Config:
    def __init__(self, world_size, parallel, backend, options, timeout, run_name=""):
        self.world_size, self.parallel, self.backend = world_size, parallel, backend
        self.options, self.timeout, self.run_name = dict(options or {}), float(timeout), run_name


def check_config(world_size, parallel, backend, options, timeout, batches, device):
    """Refuses, before any training, what the ranks could not run."""
    if not isinstance(world_size, int) or isinstance(world_size, bool) or not 1 <= world_size <= 64:
        raise BadInput(f"world_size must be an integer in 1..64, not {world_size!r}")
    if parallel not in PARALLELS:
        raise BadInput(f"parallel must be one of {', '.join(PARALLELS)}, not {parallel!r}")
    if backend not in BACKENDS:
        raise BadInput(f"backend must be one of {', '.join(BACKENDS)}, not {backend!r}")
    if not dist.is_available():
        raise BadInput("this torch was built without torch.distributed")
    if backend == "gloo" and not dist.is_gloo_available():
        raise BadInput("backend gloo: this torch has no gloo")
    if backend == "nccl" and not (dist.is_nccl_available() and torch.cuda.device_count() >= world_size):
        nccl = "available" if dist.is_nccl_available() else "absent"
        raise BadInput(f"backend nccl needs {world_size} CUDA devices and NCCL; this machine has "
                       f"{torch.cuda.device_count()} device(s), NCCL {nccl}")
    if backend == "nccl":
        raise BadInput("backend nccl is not supported yet: the ranks are forked from this process, which runs the "
                       "single-process baselines on the GPU first, and CUDA cannot be used again in a forked child; "
                       "NCCL ranks need a spawn launcher (docs/distributed.md)")
    if backend == "gloo" and torch.device(device).type != "cpu":
        raise BadInput(f"backend gloo runs the ranks on the CPU; device {device!r} needs backend='nccl'")
    if options is not None and not isinstance(options, dict):
        raise BadInput(f"parallel_options must be a dict of keyword arguments, not {type(options).__name__}")
    if not (isinstance(timeout, (int, float)) and not isinstance(timeout, bool) and 0 < timeout < 86400):
        raise BadInput(f"timeout must be a number of seconds in (0, 86400), not {timeout!r}")
    for k, batch in enumerate(batches, start=1):
        for t in _leaves(batch):
            if t.dim() == 0 or t.shape[0] % world_size:
                raise BadInput(f"batch {k}: a tensor of shape {tuple(t.shape)} cannot be split into {world_size} "
                               f"equal parts along dim 0; each rank trains on batch_size / world_size rows")


def _leaves(obj):
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (tuple, list)):
        return [t for o in obj for t in _leaves(o)]
    if isinstance(obj, dict):
        return [t for o in obj.values() for t in _leaves(o)]
    return []


def _signal_name(code):
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


def launch(spec, cfg: Config, run: DistRun, run_name: str) -> RunRecord:
    """Trains one run on cfg.world_size ranks; its RunRecord, or one with
    outcome=error naming the rank that failed and its last message."""
    cfg = Config(cfg.world_size, cfg.parallel, cfg.backend, cfg.options, cfg.timeout, run_name)
    world = cfg.world_size
    _preimport(cfg.parallel)
    folder = tempfile.mkdtemp(prefix=f"ckpt_verify.{run_name}.")
    store = dist.TCPStore("127.0.0.1", 0, world + 1, is_master=True, wait_for_workers=False)
    ctx = multiprocessing.get_context("fork")
    procs, conns, last, done, errors = [], [], {}, {}, {}
    started = time.monotonic()
    record = RunRecord(run_name)
    try:
        pgid = 0
        for rank in range(world):
            parent_end, child_end = ctx.Pipe(duplex=False)
            p = ctx.Process(target=_rank_entry, args=(spec, cfg, run, rank, world, store.port, child_end, folder,
                                                      pgid), daemon=False)
            p.start()
            child_end.close()
            try:  # the ranks form one process group, led by rank 0 (set here and in the child: no race)
                os.setpgid(p.pid, pgid or p.pid)
            except OSError:
                pass
            pgid = pgid or p.pid
            procs.append(p)
            conns.append(parent_end)
            last[rank] = "started"
        failed_at = None
        while len(done) + len(errors) < world:
            now = time.monotonic()
            if now - started > cfg.timeout or (failed_at is not None and now - failed_at > GRACE):
                break
            waitables = [c for r, c in enumerate(conns) if r not in done and r not in errors and not c.closed]
            waitables += [p.sentinel for r, p in enumerate(procs) if r not in done and r not in errors]
            for ready in multiprocessing.connection.wait(waitables, timeout=0.2):
                for rank, c in enumerate(conns):
                    if ready is c:
                        _drain(rank, c, last, done, errors)
            for rank, p in enumerate(procs):
                if rank in done or rank in errors or p.exitcode is None:
                    continue
                _drain(rank, conns[rank], last, done, errors)
                if rank not in done and rank not in errors:
                    how = (f"killed by {_signal_name(p.exitcode)}" if p.exitcode < 0
                           else f"exited with status {p.exitcode}")
                    errors[rank] = (f"rank {rank} died ({how}); its last message: {last[rank]!r}", None, None)
            if errors and failed_at is None:
                failed_at = time.monotonic()
        if len(done) < world:
            if errors:
                rank = _cause(errors)
                message, tb, _ = errors[rank]
                if not message.startswith(f"rank {rank} "):
                    message = f"rank {rank}: {message}"
                others = [f"rank {r}: {errors[r][0]}" for r in sorted(errors) if r != rank]
                hung = [r for r in range(world) if r not in done and r not in errors]
                if hung:
                    others.append("still running, killed: " + ", ".join(f"rank {r} (last message {last[r]!r})"
                                                                        for r in hung))
                record.attrs["message"] = message + (f" [{'; '.join(others)}]" if others else "")
                if tb:
                    record.attrs["traceback"] = tb
            else:
                hung = [r for r in range(world) if r not in done]
                record.attrs["message"] = (f"timed out after {cfg.timeout:g} s: " + "; ".join(
                    f"rank {r} still running, its last message {last[r]!r}" for r in hung) + " (ranks killed)")
            record.attrs["outcome"] = "error"
            return record
        results = [torch.load(done[r], weights_only=False) for r in range(world)]
        changed = [(r, res["changed"]) for r, res in enumerate(results) if res.get("changed")]
        if changed:  # the run's ERROR, named; its tensors are kept as for a run that raised
            rank, what = changed[0]
            record.attrs["outcome"] = "error"
            record.attrs["message"] = (f"run {run_name} changed {what} on rank {rank}: a step must leave its "
                                       f"batch as it found it (each run had its own copy)")
            record.changed_batch = what  # for train_all: a baseline that does this is refused
        return _assemble(record, results, cfg)
    finally:
        if procs:
            _kill_group(procs)
        for c in conns:
            c.close()
        del store
        shutil.rmtree(folder, ignore_errors=True)


def _cause(errors):
    """The rank whose error caused the others': a rank that died (the
    others' collectives lost a peer), else the rank that raised first (by
    the time each rank sent with its error; rank 0's gloo "Connection
    closed by peer" comes after the peer that raised has gone)."""
    died = [r for r in errors if errors[r][1] is None and errors[r][0].startswith(f"rank {r} died")]
    if died:
        return min(died)
    return min(errors, key=lambda r: (errors[r][2] if errors[r][2] is not None else float("inf"), r))


def _preimport(parallel):
    """Imports here, once, what the wrappers import on first use (DDP pulls
    in torch._dynamo, ~900 modules, seconds): the forked ranks inherit them
    instead of each importing them again."""
    import torch._dynamo  # noqa: F401
    import torch.nn.parallel.distributed  # noqa: F401
    if parallel in ("fsdp", "fsdp2"):
        import torch.distributed.algorithms._checkpoint.checkpoint_wrapper  # noqa: F401
        import torch.distributed.fsdp  # noqa: F401


def _rank_entry(spec, cfg, run, rank, world, port, conn, folder, pgid):
    try:
        os.setpgid(0, pgid)
    except OSError:
        pass
    rank_main(spec, cfg, run, rank, world, port, conn, folder)


def _drain(rank, conn, last, done, errors):
    try:
        while not conn.closed and conn.poll():
            kind, *rest = conn.recv()
            if kind == "msg":
                last[rank] = rest[0]
            elif kind == "done":
                done[rank] = rest[0]
            elif kind == "error":
                errors[rank] = (rest[0], rest[1], rest[2] if len(rest) > 2 else None)
    except (EOFError, OSError):
        conn.close()


def _kill_group(procs):
    """SIGKILL to the ranks' process group (and to each rank, should one
    have left it), then reap them all."""
    leader = procs[0].pid
    if any(p.exitcode is None for p in procs):
        try:
            os.killpg(leader, signal.SIGKILL)
        except OSError:
            pass
        for p in procs:
            if p.exitcode is None:
                try:
                    os.kill(p.pid, signal.SIGKILL)
                except OSError:
                    pass
    for p in procs:
        p.join(timeout=10)


# A run's statement, per rank: never reduced to a maximum over ranks.
STATEMENT_ATTRS = memory_map.STEP_ATTRS


def _assemble(record, results, cfg):
    """One RunRecord from the ranks' results: rank 0's global view first
    (what the judge compares with the single-process runs), then each
    rank's tensors and figures under ranks/<r>/."""
    record.tensors.update(results[0]["global"])
    # Each rank's memory map (DDP): the first baseline's are every later
    # run's statement basis, rank by rank (train_all keeps them).
    record.memory_maps = [res.get("memory_map") for res in results]
    texts = {}
    # No checks/step_start_bytes (the judge's leak check): a rank's live
    # bytes as a step starts include the process group's in-flight work,
    # whose buffers are freed when gloo's threads let go of them. Two
    # identical FSDP2 runs measured 256 B apart, a false "leak"; the
    # per-rank memory figures stay in ranks/<r>/memory.
    for rank, res in enumerate(results):
        for key, t in res["tensors"].items():
            if not key.startswith("checks/step_start_bytes"):  # the hook counts are judged per rank
                record.tensors[f"ranks/{rank}/{key}"] = t
        for key, value in res["attrs"].items():
            if key.startswith("memory_"):  # the statement's names: the worst rank's, below
                continue
            if value is not None:
                record.attrs[f"ranks/{rank}/{key}"] = value
    for key in results[0]["attrs"]:
        values = [res["attrs"].get(key) for res in results if res["attrs"].get(key) is not None]
        if key in STATEMENT_ATTRS:
            continue  # judged rank by rank (ranks/<r>/memory), never as a maximum over ranks
        if values and (key.startswith("memory.") or key.startswith("timing.")):
            record.attrs[key] = max(values)  # the rank that needs most bounds the job
    stated = [(res["attrs"].get("memory.judged_held_bytes", 0) - res["attrs"]["memory.stated_end_forward_bytes"],
               rank, res["attrs"]) for rank, res in enumerate(results)
              if res["attrs"].get("memory.stated_end_forward_bytes") is not None]
    if stated:
        _, rank, worst = max(stated, key=lambda s: s[0])
        for key in memory_map.TEXT_ATTRS:
            if worst.get(key):
                texts[key] = f"rank {rank}: {worst[key]}"
    record.attrs.update(texts)
    record.attrs["world_size"] = cfg.world_size
    record.attrs["parallel"] = cfg.parallel
    record.attrs["backend"] = cfg.backend
    return record


def family(parallel):
    return f"{parallel}_baseline"


def single_family(parallel):
    return f"{parallel}_or_single_baseline"


def twin_name(run_name):
    return f"{run_name}_vs_single"


_WRAPPER_NAMES = {"ddp": "DDP", "fsdp": "FSDP", "fsdp2": "FSDP2"}


def dropout_modules(model: torch.nn.Module) -> list[str]:
    """The model's dropout modules that draw ("blocks.0.drop p=0.25"):
    every run trains the model in train mode, so each with p > 0 does."""
    return [f"{name or type(m).__name__} p={m.p:g}" for name, m in model.named_modules()
            if isinstance(m, torch.nn.modules.dropout._DropoutNd) and m.p > 0]


def twin_texts(cfg: Config, run_name: str, dropout: list[str], random_ops: list[str]) -> dict:
    """The attributes that make /runs/<run>_vs_single a twin for the judge
    (judge.c, twins_follow_their_runs): the run it is (twin_of) and what
    its family's spread stands for (noise_cause, the head of a NOISE
    reason): the ranks against one process, and, for a model that draws
    random numbers (`dropout` modules, or `random_ops` the probe saw in
    the baseline's forward), what can then be claimed at all."""
    wrapper = _WRAPPER_NAMES.get(cfg.parallel, cfg.parallel)
    compared = f"this run's gradients ({cfg.world_size} {wrapper} ranks) vs a single-process run of the same model"
    if dropout or random_ops:
        what = ", ".join(dropout[:2]) + (f" and {len(dropout) - 2} more" if len(dropout) > 2 else "")
        what = what or "random ops in forward: " + ", ".join(random_ops[:2])
        cause = (f"{compared}, which draws random numbers ({what}): the ranks' RNG streams differ from one "
                 f"process's, so this says only that the run is no further from one process than plain {wrapper} "
                 f"is; its RNG replay is judged against {family(cfg.parallel)}_0 alone")
    else:
        cause = f"{compared}: what distribution does to the numbers (reduction order, loss scaling), not the checkpoint"
    return {"twin_of": run_name, "noise_cause": cause}


def twin_names(runs, against_single):
    """The extra judged runs verify() will have, for /case expect. A run
    name must leave room for its twin's re-runs (`<run>_vs_single_rerun_<k>`)
    in the judge's 63 characters."""
    if not against_single:
        return {}
    for run in runs:
        if len(twin_name(run)) + len("_rerun_99") > 63:
            raise BadRunName(f"run {run!r}: with against_single its twin {twin_name(run)!r} and that twin's "
                             f"re-runs need {len(run)} + 19 characters, more than a run name's 63; shorten it")
    return {run: twin_name(run) for run in runs}


def train_all(spec, cfg: Config, baseline: Run, runs: dict, noise_runs: int, recorder, singles, against_single,
              skipped=()):
    """The distributed part of verify(): plain distributed baselines (two,
    more when they differ), each run (re-run when it differs), and the
    _vs_single twins with their family. `singles` are the single-process
    baselines' records, already in the report."""
    fam = family(cfg.parallel)
    plain = as_dist_run(baseline)
    bases = []  # names: the runs are compared in the report, one tensor at a time
    for k in range(2 + noise_runs):
        if k >= 2 and same_results(recorder.file, bases[0], bases[1]):
            break
        rec = launch(spec, cfg, plain, f"{fam}_{k}")
        if getattr(rec, "changed_batch", None):
            raise BadInput(f"the plain distributed baseline changes its batch: {rec.attrs['message']}")
        if "outcome" in rec.attrs:
            raise RunError(f"the plain distributed baseline failed: {rec.attrs['message']}")
        if k == 0 and any(getattr(rec, "memory_maps", None) or []):
            spec.dist_baseline_maps = {r: m for r, m in enumerate(rec.memory_maps) if m is not None}
        recorder.add(rec, {"producer": f"ckpt_verify distributed ({cfg.parallel}, {cfg.backend})"})
        bases.append(rec.name)
        del rec
        if k >= 1:
            check_same_tensors(recorder, bases[0], bases[-1])
    if against_single:
        sources = [*singles, *bases]
        for k, source in enumerate(sources):
            link_run(recorder, source, f"{single_family(cfg.parallel)}_{k}", drop_ranks=True)
    for run_name, run in runs.items():
        if run_name in skipped:
            continue
        run = as_dist_run(run)
        samples = []  # (name, attributes): the tensors are in the report
        for k in range(noise_runs + 1):
            name = run_name if k == 0 else f"{run_name}_rerun_{k}"
            rec = launch(spec, cfg, run, name)
            recorder.add(rec, {"baselines": fam})
            samples.append((name, dict(rec.attrs)))
            del rec
            if "outcome" in samples[-1][1] or same_results(recorder.file, bases[0], name, skip=("ranks/",)):
                break
        if against_single:
            texts = twin_texts(cfg, run_name, getattr(spec, "dropout_modules", []), spec.forward_random)
            for i, (sample, attrs) in enumerate(samples):
                name = twin_name(run_name) + (f"_rerun_{i}" if i else "")
                if "outcome" in attrs:
                    err = RunRecord(name)
                    err.attrs = {**{k: v for k, v in attrs.items() if k != "baselines"}, **texts}
                    recorder.add(err, {"baselines": single_family(cfg.parallel)})
                else:
                    link_run(recorder, sample, name, drop_ranks=True,
                              extra={"baselines": single_family(cfg.parallel), **texts})
