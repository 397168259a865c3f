"""What one rank of a distributed run does (frontends/distributed.py starts
the ranks): join the gloo (or NCCL) process group through the launcher's
TCPStore on 127.0.0.1, build the seeded model, apply the run's checkpoint,
wrap it for the parallelism (DDP, FSDP, FSDP2), train `steps` steps on its
slice of each global batch, and save what it recorded to `rank<r>.pt` in
the launch folder. Progress goes to the launcher as one-line messages on a
pipe, so a rank that dies or hangs is reported with its last message; a
rank that raises sends its error with the time it raised (the system-wide
monotonic clock), so the launcher names the first one as the cause. A rank
trains on its own copy of the batches and says whether its step changed
them in place (their CRC-32 before and after).

A rank records, per step, its own loss and gradients (DDP: the averaged
full gradient every rank holds; FSDP/FSDP2: its local shard) and its
memory and time. Rank 0 also records the global view the judge compares:
the mean of the ranks' losses, every parameter's full gradient (FSDP:
gathered from the shards) and the final full parameters. Results are named
by the plain model's parameter names, whatever the wrappers call them.

Seeding: every rank builds the model after seeding with the run's seed
(identical parameters on every rank, as a data-parallel trainer starts);
then its random streams (torch's, Python's random, numpy's global
generator: eager.seed_all) are seeded with seed + rank, so dropout draws its own
masks on every rank (per-rank RNG), the same masks in every run."""
import contextlib
import datetime
import gc
import os
import re
import statistics
import time
import traceback

import torch
import torch.distributed as dist

from ..errors import RunError
from . import memory_map
from .eager import (
    HookCounts,
    _backward,
    batch_checksums,
    changed_batch,
    check_loss,
    check_same_model,
    copy_batch,
    seed_all,
)
from .eager import _call as _eager_call

# Names wrappers add to the plain model's parameter names.
_WRAPPER_PARTS = ("_fsdp_wrapped_module", "_checkpoint_wrapped_module", "_orig_mod")


def plain_name(name: str, ddp: bool) -> str:
    parts = name.split(".")
    if ddp and parts and parts[0] == "module":
        parts = parts[1:]
    return ".".join(p for p in parts if p not in _WRAPPER_PARTS)


def local_slice(obj, rank, world):
    """Rank `rank`'s rows of every tensor in a batch (dim 0, equal parts)."""
    if isinstance(obj, torch.Tensor):
        n = obj.shape[0] // world
        return obj[rank * n:(rank + 1) * n]
    if isinstance(obj, tuple):
        return tuple(local_slice(o, rank, world) for o in obj)
    if isinstance(obj, list):
        return [local_slice(o, rank, world) for o in obj]
    if isinstance(obj, dict):
        return {k: local_slice(v, rank, world) for k, v in obj.items()}
    return obj


def wrap(model, parallel, options):
    """The model wrapped for the parallelism, with `options` passed to the
    wrapper (DDP's find_unused_parameters, static_graph; FSDP's
    auto_wrap_policy; FSDP2's `units`, a function giving the submodules to
    shard before the root)."""
    options = dict(options or {})
    if parallel == "ddp":
        from torch.nn.parallel import DistributedDataParallel
        return DistributedDataParallel(model, **options)
    if parallel == "fsdp":
        from torch.distributed.fsdp import FullyShardedDataParallel
        options.setdefault("use_orig_params", True)
        options.setdefault("device_id", torch.device("cpu"))  # without it FSDP refuses a CPU-only host
        return FullyShardedDataParallel(model, **options)
    if parallel == "fsdp2":
        from torch.distributed.fsdp import fully_shard
        units = options.pop("units", None)
        for unit in (units(model) if units else []):
            fully_shard(unit, **options)
        fully_shard(model, **options)
        return model
    raise ValueError(f"unknown parallel {parallel!r}")


class Collectives:
    """Counts the all-gathers (calls and bytes) the sharded wrappers issue
    through torch.distributed while installed: the cost of a recompute that
    gathers the parameters again. Wraps the real functions; the collectives
    still run."""

    NAMES = ("all_gather_into_tensor", "all_gather")

    def __init__(self):
        self.calls, self.bytes, self.saved = 0, 0, {}

    def __enter__(self):
        for name in self.NAMES:
            real = getattr(dist, name)
            self.saved[name] = real

            def counted(out, *args, _real=real, **kwargs):
                self.calls += 1
                tensors = out if isinstance(out, (list, tuple)) else [out]
                self.bytes += sum(t.numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor))
                return _real(out, *args, **kwargs)
            setattr(dist, name, counted)
        return self

    def __exit__(self, *exc):
        for name, real in self.saved.items():
            setattr(dist, name, real)
        return False


def wrapper_hint(error: BaseException | None, model) -> str:
    """For a step that reached through DDP's wrapper for an attribute of
    the model ('DistributedDataParallel' object has no attribute 'blocks'):
    where that attribute is, and why the step gets the wrapper. "" for any
    other error. (FSDP forwards unknown attributes to the module it wraps,
    and FSDP2 shards the model in place, so only DDP needs this.)"""
    from torch.nn.parallel import DistributedDataParallel
    name = getattr(error, "name", None)
    if isinstance(error, AttributeError) and not name:  # nn.Module.__getattr__ names it only in its message
        found = re.search(r"'DistributedDataParallel' object has no attribute '(\w+)'", str(error))
        name = found.group(1) if found else None
    if not (isinstance(error, AttributeError) and isinstance(model, DistributedDataParallel) and name
            and hasattr(model.module, name)):
        return ""
    return (f"the step function gets the DDP-wrapped model, whose forward must run through the wrapper's hooks "
            f"(they all-reduce the gradients): call model(...) for the forward, and reach the model's own "
            f"attributes through model.module (model.module.{name}); docs/distributed.md, \"The model a step "
            f"function gets\"")


def _call(step_fn, model, batch, run_name, step):
    """eager._call (the step, its error named), with wrapper_hint()'s
    hint added to an error that reached through DDP's wrapper."""
    try:
        return _eager_call(step_fn, model, batch, run_name, step)
    except RunError as e:
        hint = wrapper_hint(e.__cause__, model)
        if not hint:
            raise
        err = RunError(f"{e}; {hint}")
        err.traceback = e.traceback
        raise err from e.__cause__


def _local(t):
    """A gradient or parameter as this rank holds it (DTensor: its shard)."""
    t = t.detach()
    return t.to_local() if hasattr(t, "to_local") else t


def _full_grads(model, parallel, namer):
    """{plain name: full gradient}: a collective on every rank."""
    if parallel == "fsdp":
        from torch.distributed.fsdp import FullyShardedDataParallel
        with FullyShardedDataParallel.summon_full_params(model, with_grads=True):
            return {namer(n, p): p.grad.detach().cpu().clone() for n, p in model.named_parameters()
                    if p.grad is not None}
    out = {}
    for n, p in model.named_parameters():
        g = p.grad
        if hasattr(p, "full_tensor"):  # FSDP2: every rank takes part, grad or not
            out[namer(n, p)] = g.full_tensor().detach().cpu().clone() if g is not None else None
        elif g is not None:
            out[namer(n, p)] = g.detach().cpu().clone()
    return {k: v for k, v in out.items() if v is not None}


def _full_params(model, parallel, namer):
    if parallel == "fsdp":
        from torch.distributed.fsdp import FullyShardedDataParallel
        with FullyShardedDataParallel.summon_full_params(model):
            return {namer(n, p): p.detach().cpu().clone() for n, p in model.named_parameters()}
    return {namer(n, p): (p.full_tensor() if hasattr(p, "full_tensor") else p).detach().cpu().clone()
            for n, p in model.named_parameters()}


class RankContext:
    """What a rank's step function can ask: ckpt_verify.rank_context()."""

    def __init__(self, rank, world, parallel, seed):
        self.rank, self.world_size, self.parallel, self.seed = rank, world, parallel, seed


_context = None


def rank_context() -> "RankContext | None":
    """The running rank (rank, world_size, parallel, seed), or None outside a
    distributed run: for step functions that must know their rank."""
    return _context


class Namer:
    """The plain model's name of a parameter or buffer of the wrapped model.
    By identity first, as the single-process frontend matches them
    (eager.prepared_model): a module of the user's own that prepare() wraps
    blocks in renames them ("blocks.0.inner.fc.weight") but trains the
    plain model's tensors. A wrapper that replaces the tensors (FSDP's flat
    parameter without use_orig_params, FSDP2's DTensor shards) keeps the
    prepared model's names under its own prefixes: those are stripped
    (plain_name) and mapped through the names the tensors had after
    prepare(), again by identity."""

    def __init__(self, plain, ddp: bool):
        self.ddp = ddp
        self.kept = _tensors(plain)  # held, so no id below is reused while the Namer lives
        self.plain = {id(t): n for n, t in self.kept}
        self.prepared: dict[str, str] = {}

    def after_prepare(self, model):
        self.prepared = {n: self.plain[id(t)] for n, t in _tensors(model) if id(t) in self.plain}

    def __call__(self, name: str, tensor) -> str:
        if id(tensor) in self.plain:
            return self.plain[id(tensor)]
        stripped = plain_name(name, self.ddp)
        return self.prepared.get(stripped, stripped)


def _tensors(model):
    """[(name, tensor)] of a model's parameters and buffers."""
    return [*model.named_parameters(), *((n, b) for n, b in model.named_buffers() if b is not None)]


def build(spec, cfg, run, rank, say, module_names=None):
    """(wrapped model, {wrapped name: plain name}, plain params, Namer);
    fills module_names, when given, with {id(module): path} of the plain
    model. A wrapped parameter is named as the plain model names it
    (Namer: by identity, as in one process), whatever prepare() and the
    wrapper call it."""
    seed_all(spec.seed)
    model = spec.model_fn()
    model.train()
    check_same_model(spec.reference, model, cfg.run_name)
    plain_params = list(model.named_parameters())
    namer = Namer(model, cfg.parallel == "ddp")
    if module_names is not None:
        module_names.update((id(m), n) for n, m in model.named_modules() if n)
    if run.prepare is not None:
        say("prepare(model)")
        model = run.prepare(model) or model
    namer.after_prepare(model)
    say(f"wrapping the model for {cfg.parallel}")
    model = (run.wrap or (lambda m: wrap(m, cfg.parallel, {**cfg.options, **run.options})))(model)
    if run.after_wrap is not None:
        say("after_wrap(model)")
        model = run.after_wrap(model) or model
    names = {n: namer(n, p) for n, p in model.named_parameters()}
    plain = [n for n, _ in plain_params]
    if sorted(names.values()) != sorted(plain):
        missing = sorted(set(plain) - set(names.values())) or sorted(set(names.values()) - set(plain))
        raise ValueError(f"the wrapped model's parameters are not the plain model's ({missing[:3]}): a wrapper "
                         f"this frontend does not know replaced them under other names")
    return model, names, plain_params, namer


def settle(meter, quiet_reads=3, poll_s=0.002, limit_s=2.0):
    """Wait until the process group has let go of its finished work, so a
    step's bytes are its own. gloo's worker threads free a collective's
    buffers just after its wait() returns: DDP's constructor broadcasts the
    parameters as one flat buffer, and its free landed inside the first
    step's forward on a loaded machine (a baseline read 66560 B, the
    model's parameter bytes, short). A barrier queues behind that work;
    then live bytes must hold still for `quiet_reads` polls."""
    if dist.is_initialized():
        dist.barrier()
    gc.collect()
    last, quiet, deadline = meter.live(), 0, time.monotonic() + limit_s
    while quiet < quiet_reads and time.monotonic() < deadline:
        time.sleep(poll_s)
        now = meter.live()
        quiet = quiet + 1 if now == last else 0
        last = now


def train_rank(spec, cfg, run, rank, world, say):
    """One rank's run; returns {"tensors": ..., "attrs": ..., "global": ...}."""
    global _context
    _context = RankContext(rank, world, cfg.parallel, spec.seed)
    meter, measured = spec.meter, spec.meter.source is not None
    # The run's own copy of the global batches (the rank is a forked
    # process, so no other run could see a change anyway), checked against
    # their checksums at the end: a step that changes its batch is named.
    batch_sums = batch_checksums(spec.batches)
    batches = [copy_batch(b) for b in spec.batches]
    before_warm = meter.live() if measured else 0
    say("warm-up step")
    modules: dict[int, str] = {}
    model, names, plain_params, _ = build(spec, cfg, run, rank, say, modules)
    seed_all(spec.seed + rank)
    batch = local_slice(batches[0], rank, world)
    # This rank's memory map of its warm-up step (frontends/memory_map.py):
    # DDP only (FSDP's sharded parameters and DTensors are not mapped yet).
    maps = measured and cfg.parallel == "ddp" and spec.device.type in ("cpu", "cuda")
    bases = getattr(spec, "dist_baseline_maps", None)
    # Hooks on the plain model's named modules, not global ones (torch
    # warns about those on every call of a torch.compile'd module).
    mapper = memory_map.MemoryMap(modules, [p for _, p in plain_params] + [b for b in model.buffers()]
                                  + list(_tensor_leaves(batch)), saves=bases is None,
                                  modules=[m for m in model.modules() if id(m) in modules],
                                  keys=memory_map.StorageKeys.for_meter(meter)) if maps else None
    say("warm-up step: forward")
    if measured:
        settle(meter)
    with mapper or contextlib.nullcontext():
        before_forward = meter.live() if measured else 0
        loss = _call(run.step, model, batch, cfg.run_name, 0)
        check_loss(loss, cfg.run_name, 0, run.step)
        if mapper:
            mapper.mark_end_forward(meter.live() - before_forward)
        say("warm-up step: backward")
        grad = torch.ones_like(loss)
        if mapper:
            mapper.backward_starts()
        _backward(loss, cfg.run_name, 0, grad)
        del loss, grad
        gc.collect()
        if mapper:
            mapper.after_backward()
    summary = memory_map.summarize(mapper) if mapper else None
    if summary is not None and spec.device.type == "cpu":
        # gloo's threads free and allocate beside the step, so a rank's
        # bytes outside every op can read short: at least each region's
        # CPU RNG stash (what torch's checkpoints keep) is counted.
        floor = len(summary.regions) * torch.get_rng_state().nbytes
        summary.outside_ops_bytes = max(summary.outside_ops_bytes, floor)
    del model, mapper
    gc.collect()
    one_time = meter.live() - before_warm if measured else None

    model, names, plain_params, namer = build(spec, cfg, run, rank, say)
    seed_all(spec.seed + rank)  # per-rank RNG: each rank its own stream, the same in every run
    params = list(model.named_parameters())
    # Each parameter's gradient hook counted per backward, as for one
    # process, into ranks/<r>/checks/hook_fires/<name>: the judge holds each
    # rank to the same rank of the plain DDP run (whose counts include
    # whatever DDP's own wrapping does). DDP trains the plain model's
    # parameter tensors, so a Tensor.register_hook on them is what a user's
    # hook would be. FSDP's are not: its autograd runs through the flat
    # parameter (FSDP) or DTensor shards (FSDP2), so none is counted there.
    hooks = HookCounts([(names[n], p) for n, p in params]) if cfg.parallel == "ddp" else None
    tensors, glob = {}, {}
    mem = {"peak_bytes": 0, "forward_peak_bytes": 0, "backward_peak_bytes": 0}
    fwd_ms, bwd_ms, gathers = [], [], []
    start_bytes = []
    for step in range(1, spec.steps + 1):
        batch = local_slice(batches[step - 1], rank, world)
        for _, p in params:
            p.grad = None
        if measured:
            settle(meter)
            start_bytes.append(meter.live())
            before = meter.live()
            meter.reset_peak()
        say(f"step {step}: forward")
        with Collectives() as coll:
            t0 = time.perf_counter()
            loss = _call(run.step, model, batch, cfg.run_name, step)
            check_loss(loss, cfg.run_name, step, run.step)
            t1 = time.perf_counter()
            if measured:
                fwd_peak = meter.peak() - before
                if step == 1:
                    mem["end_forward_bytes"] = meter.live() - before
                    mem["step_start_bytes"] = before
                meter.reset_peak()
            forward_gathers = coll.calls
            say(f"step {step}: backward")
            if hooks:
                hooks.start_backward()
            _backward(loss, cfg.run_name, step)
            if hooks:
                hooks.end_backward([(names[n], p) for n, p in params])
            t2 = time.perf_counter()
        gathers.append((forward_gathers, coll.calls - forward_gathers, coll.bytes))
        if measured:
            bwd_peak = meter.peak() - before
            mem["forward_peak_bytes"] = max(mem["forward_peak_bytes"], fwd_peak)
            mem["backward_peak_bytes"] = max(mem["backward_peak_bytes"], bwd_peak)
            mem["peak_bytes"] = max(mem["peak_bytes"], fwd_peak, bwd_peak)
            if step == 1:
                mem["grad_bytes"] = sum(_local(p.grad).numel() * p.grad.element_size() for _, p in params
                                        if p.grad is not None)
        fwd_ms.append((t1 - t0) * 1e3)
        bwd_ms.append((t2 - t1) * 1e3)
        say(f"step {step}: recording")
        local_loss = loss.detach().cpu().clone()
        tensors[f"steps/{step}/loss"] = local_loss
        for n, p in params:
            if p.grad is not None:
                tensors[f"steps/{step}/grads/{names[n]}"] = _local(p.grad).cpu().clone()
        for n, b in model.named_buffers():  # module state: running statistics, counters
            if b is not None:
                tensors[f"steps/{step}/buffers/{namer(n, b)}"] = b.detach().cpu().clone()
                if rank == 0:
                    glob[f"steps/{step}/buffers/{namer(n, b)}"] = b.detach().cpu().clone()
        losses = [torch.zeros_like(local_loss) for _ in range(world)]
        dist.all_gather(losses, local_loss)
        full = _full_grads(model, cfg.parallel, namer)
        if rank == 0:
            glob[f"steps/{step}/loss"] = torch.stack(losses).mean()
            for n, _ in plain_params:
                if n in full:
                    glob[f"steps/{step}/grads/{n}"] = full[n]
        del loss
        with torch.no_grad():
            for _, p in params:
                if p.grad is not None:
                    p.add_(p.grad, alpha=-spec.lr)  # the harness's SGD update, on each rank's own part
    final = _full_params(model, cfg.parallel, namer)
    if rank == 0:
        for n, _ in plain_params:
            glob[f"final_params/{n}"] = final[n]
    if start_bytes:
        tensors["checks/step_start_bytes"] = torch.tensor(start_bytes, dtype=torch.int64)
    if hooks:
        tensors.update(hooks.record())
    attrs = {}
    if measured:
        attrs.update({f"memory.{k}": v for k, v in mem.items()})
        attrs["memory.one_time_bytes"] = one_time
    if summary is not None and "end_forward_bytes" in mem:
        if bases is not None and rank in bases and not cfg.run_name.startswith(f"{cfg.parallel}_baseline_"):
            if getattr(run, "memory", "judged") is None:
                attrs["memory.control"] = 1
            else:
                base_summary, base_held = bases[rank]
                attrs.update(memory_map.statement_attrs(base_summary, summary, base_held, mem["end_forward_bytes"]))
    attrs["timing.forward_ms"] = statistics.median(fwd_ms)
    attrs["timing.backward_ms"] = statistics.median(bwd_ms)
    attrs["timing.step_ms"] = statistics.median(f + b for f, b in zip(fwd_ms, bwd_ms))
    attrs["collectives.forward_all_gathers"] = gathers[0][0]
    attrs["collectives.backward_all_gathers"] = gathers[0][1]
    attrs["collectives.all_gather_bytes"] = gathers[0][2]
    return {"tensors": tensors, "attrs": attrs, "global": glob, "changed": changed_batch(batch_sums, batches),
            "memory_map": (summary, mem.get("end_forward_bytes")) if summary is not None else None}


def _tensor_leaves(obj):
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (tuple, list)):
        for o in obj:
            yield from _tensor_leaves(o)
    elif isinstance(obj, dict):
        for o in obj.values():
            yield from _tensor_leaves(o)


def rank_main(spec, cfg, run, rank, world, port, conn, folder):
    """The body of a rank process: never returns (os._exit), so nothing of
    the launcher's (its atexit handlers, its temporary folders) runs here."""
    code = 1
    try:
        torch.set_num_threads(1)  # ranks share the cores; one thread each, the same in every run

        def say(text):
            conn.send(("msg", text))
        say(f"joining the {cfg.backend} process group (127.0.0.1:{port})")
        store = dist.TCPStore("127.0.0.1", port, world, is_master=False,
                              timeout=datetime.timedelta(seconds=cfg.timeout))
        # The collectives' own timeout is longer than the launcher's, so that a
        # hang is reported by the launcher, naming every rank's last message,
        # rather than as a gloo timeout of whichever rank waited.
        dist.init_process_group(cfg.backend, store=store, rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=2 * cfg.timeout + 10))
        result = train_rank(spec, cfg, run, rank, world, say)
        say("saving")
        path = os.path.join(folder, f"rank{rank}.pt")
        torch.save(result, path)
        dist.barrier()
        dist.destroy_process_group()
        conn.send(("done", path))
        code = 0
    except BaseException as e:  # noqa: BLE001 - everything a rank raises is its run's ERROR
        text = getattr(e, "traceback", None) or "".join(traceback.format_exception(type(e), e, e.__traceback__))
        line = str(e) if isinstance(e, RunError) else f"{type(e).__name__}: {e}"
        try:  # with when it raised: the first rank to raise is the cause, the others' lost peers follow
            conn.send(("error", line.strip().split("\n")[0], text, time.monotonic()))
        except Exception:  # noqa: BLE001 - the launcher may be gone; exit anyway
            pass
    finally:
        try:
            conn.close()
        finally:
            os._exit(code)
