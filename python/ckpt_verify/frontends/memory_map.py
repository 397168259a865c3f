"""The memory map of a step: every storage the forward leaves alive, by
producing op and module, who saved it for backward and who else holds it,
and what the backward ran again. It is the expectation for a user's
checkpoint, taken from the plain baseline, the checkpoint's declared
policy and the run's own recompute, never from what the run happens to
hold.

A MemoryMap is a TorchDispatchMode (every op passes through unchanged)
with forward hooks on each named module of the plain model (the module
stack: per-module hooks, not global ones, which torch.compile(module)
warns about on every call) and, for a baseline,
saved-tensor hooks that note which module's op saved each tensor. It
rides on the recorded steps themselves (one map per step), and holds only
weak references to storages, so it keeps nothing alive:

  held()          the storages made by this step's forward ops and alive
                  when forward ends (mark_end_forward), each with its op,
                  module, bytes, the modules whose ops saved it, and its
                  owner when one is found (a module attribute, an autograd
                  Function's ctx, a hook's closure);
  state()         tensors held by the model's attributes, a Function's ctx
                  or a hook that were born before this step's forward;
  declared        the outputs a selective policy (torch's
                  create_selective_checkpoint_contexts) decided to save:
                  its own decisions, read from its policy calls;
  recompute       ops run with grad mode on inside backward (a plain
                  backward runs none), the modules whose forward ran again
                  there, and the regions (outermost such module calls);
  survival        whether each storage of this step outlives the next
                  step's forward (then it is state, judged by the leak
                  check), and which of this step's storages are alive at
                  the next step's start and gone by the one after (kept
                  after backward: a per-step holdover).

judge_steps() turns the baseline's maps and the run's maps, step by step,
into the statement (what a correct checkpoint of the regions each step
recomputes holds at the end of forward), the extras (storages born in the
step's forward that the baseline does not hold and nothing declares) and
the holdovers, and run_attrs() into the report's attributes.
docs/memory.md ("A user's checkpoint") has the rules and their figures."""
from __future__ import annotations

import collections
import dataclasses
from collections import Counter

import torch
from torch.multiprocessing.reductions import StorageWeakRef
from torch.nn.modules import module as nn_module
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

ROOT = "(model)"   # ops outside every named module: the step function's own

# Bytes a correct checkpoint may hold at the end of forward, per step, beyond
# its statement, and the least a checkpoint must save to be one: room for
# allocator bookkeeping, never a fraction of the baseline. Measured on the
# correct checkpoints of tests/python/test_user_memory.py and the realworld
# suite on the CPU (docs/memory.md, "The floor"): the largest residue there
# is 4,176 B (DeepSpeed's partition bookkeeping); the smallest real saving
# the floor must not hide is a fused op's 12,544 B.
FLOOR_BYTES = 8192


@dataclasses.dataclass
class Held:
    """A storage made by an op of a step (or, for state, found on an owner)."""
    module: str
    op: str
    index: int                  # the how-many-th output of this op in this module (and phase)
    nbytes: int
    saved_by: tuple[str, ...]   # modules whose ops saved it for backward (baseline maps)
    made: object = None         # what made it (identity: one per storage the step made)
    owner: str = ""             # who holds it besides autograd, when found ("blocks.0.cache", "ctx of F")
    declared: bool = False      # a selective policy decided to save it
    survives: bool | None = None  # alive at the end of the next step's forward (None: not known)
    phase: str = "forward"

    @property
    def name(self) -> str:
        return f"{self.module}:{self.op}#{self.index}"


class _Made:
    __slots__ = ("ref", "module", "op", "index", "nbytes", "declared", "phase")

    def __init__(self, ref, module, op, index, nbytes, declared=False, phase="forward"):
        self.ref, self.module, self.op, self.index, self.nbytes = ref, module, op, index, nbytes
        self.declared, self.phase = declared, phase

    def alive(self) -> bool:
        return self.ref.alive()


# -- naming storages -------------------------------------------------------------
# The map names every storage a step makes and later asks whether it still
# lives. A weak reference does that on any device, but it keeps the
# storage's small C++ object until the map lets go: on the CPU, thousands
# of them pinned in malloc's heap between the step's large buffers kept the
# freed buffers from being reused, and a mapped 124M step's resident memory
# grew by about 700 MB with the same live tensor bytes (docs/memory.md,
# "What the map costs"). On the counting CPU allocator a storage is named
# by its data pointer and its allocation's serial number instead, which
# holds nothing.
class _WeakHandle:
    __slots__ = ("ref", "key", "nbytes")

    def __init__(self, ref, nbytes):
        self.ref, self.key, self.nbytes = ref, ref.cdata, nbytes

    def alive(self) -> bool:
        return not self.ref.expired()


class _SerialHandle:
    __slots__ = ("ptr", "serial", "key", "nbytes", "_serial_of")

    def __init__(self, ptr, serial, nbytes, serial_of):
        self.ptr, self.serial, self.nbytes, self._serial_of = ptr, serial, nbytes, serial_of
        self.key = (ptr, serial)

    def alive(self) -> bool:
        return self._serial_of(self.ptr) == self.serial


class StorageKeys:
    """handle(t): the storage of tensor t as a handle with .key (hashable,
    one per storage while it lives), .nbytes and .alive(), or None for a tensor with
    no storage of its own (sparse, nested, meta: not counted).
    serial_of: the counting allocator's allocation_serial (memory.py), or
    None for weak references only."""

    def __init__(self, serial_of=None):
        self.serial_of = serial_of

    @classmethod
    def for_meter(cls, meter) -> "StorageKeys":
        return cls(getattr(meter, "allocation_serial", None))

    def handle(self, t):
        try:
            storage = t.untyped_storage()
            if self.serial_of is not None and storage.device.type == "cpu":
                ptr = storage.data_ptr()
                serial = self.serial_of(ptr) if ptr else 0
                if serial:
                    return _SerialHandle(ptr, serial, storage.nbytes(), self.serial_of)
            # not this allocator's (made before it, or memory from numpy)
            return _WeakHandle(StorageWeakRef(storage), storage.nbytes())
        except (RuntimeError, NotImplementedError, TypeError):
            return None


_WEAK_KEYS = StorageKeys()


def _mark_pack(method):
    def pack(t):
        return method(t)
    pack._ckpt_verify_memory_map = True  # the recompute probe ignores these hooks
    return pack


# -- a selective policy's own decisions ----------------------------------------
# torch's selective checkpoint (_CachingTorchDispatchMode) asks its policy
# about each op, then runs the op (through the map, the mode below it), then
# stores the output when the policy said save. While a map is entered the
# policy call is wrapped so the decision is noted for the op the map sees
# next: the statement credits only what the policy declared saved.
_PENDING: list = []   # [func, saved?] of the last policy decision not yet seen by the map


def _sac_patch():
    """(class, original __torch_dispatch__, patched) or None on a torch
    without selective checkpointing."""
    try:
        from torch.utils import checkpoint as ck
        cls = ck._CachingTorchDispatchMode
        save = (ck.CheckpointPolicy.MUST_SAVE, ck.CheckpointPolicy.PREFER_SAVE)
    except AttributeError:
        return None
    orig = cls.__torch_dispatch__

    def patched(self, func, types, args=(), kwargs=None):
        policy_fn = self.policy_fn

        def noting(ctx, f, *a, **k):
            decision = policy_fn(ctx, f, *a, **k)
            _PENDING[:] = [f, decision is True or decision in save]
            return decision
        self.policy_fn = noting
        try:
            return orig(self, func, types, args, kwargs)
        finally:
            self.policy_fn = policy_fn
    return cls, orig, patched


# -- owners -------------------------------------------------------------------
_MODULE_INTERNALS = {"_parameters", "_buffers", "_modules", "_non_persistent_buffers_set", "_state_dict_hooks",
                     "_state_dict_pre_hooks", "_load_state_dict_pre_hooks", "_load_state_dict_post_hooks"}
_HOOK_DICTS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")


def _tensors_in(value, depth=3):
    """Tensors in a value: itself, or inside lists, tuples, deques, sets and
    dicts up to `depth` levels (a deque of RNG states, a dict of caches)."""
    if isinstance(value, torch.Tensor):
        yield value
    elif depth > 0 and isinstance(value, (list, tuple, collections.deque, set, frozenset)):
        for v in value:
            yield from _tensors_in(v, depth - 1)
    elif depth > 0 and isinstance(value, dict):
        for v in value.values():
            yield from _tensors_in(v, depth - 1)


def _closure_values(fn):
    fn = getattr(fn, "__func__", fn)
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            yield cell.cell_contents
        except ValueError:
            continue


def find_owners(modules, loss=None, keys: StorageKeys = _WEAK_KEYS) -> dict[object, tuple[str, object, int]]:
    """{storage key: (owner, handle, bytes)} of every tensor held by a module
    attribute (not a parameter or buffer), by a module hook's closure, or
    by an autograd Function's ctx in the graph of `loss`. `modules`:
    [(path, module)] ("" is the root, named "(model)")."""
    owners: dict[object, tuple[str, object, int]] = {}

    def note(t, owner):
        h = keys.handle(t)
        if h is not None and h.key not in owners:
            owners[h.key] = (owner, h, h.nbytes)

    for path, module in modules:
        where = path or ROOT
        for attr, value in vars(module).items():
            if attr in _MODULE_INTERNALS:
                continue
            if attr in _HOOK_DICTS:
                for hook in value.values():
                    for v in _closure_values(hook):
                        for t in _tensors_in(v):
                            note(t, f"{where} hook {getattr(hook, '__qualname__', 'closure')}")
                continue
            for t in _tensors_in(value):
                note(t, f"{path}.{attr}" if path else attr)
    if isinstance(loss, torch.Tensor) and loss.grad_fn is not None:
        seen, todo = set(), [loss.grad_fn]
        while todo:
            node = todo.pop()
            if node is None or id(node) in seen:
                continue
            seen.add(id(node))
            attrs = getattr(node, "__dict__", None)
            if attrs:  # a Python autograd Function's ctx: what its forward put there
                fn = type(node).__name__.removesuffix("Backward")
                for attr, value in attrs.items():
                    for t in _tensors_in(value):
                        note(t, f"ctx of {fn} (.{attr})")
            todo.extend(n for n, _ in node.next_functions)
    return owners


class MemoryMap(TorchDispatchMode):
    """Enter around one step (forward and backward); call
    mark_end_forward() when forward is done, backward_starts() before the
    backward call and after_backward() once it is done. For survival: the
    next step calls next_step_starts(), next_forward_ends() and, one step
    later, next_step_ends() on this map.

    names: {id(module): path} of the plain model (wrappers a run adds are
    not named: their ops count toward the named module around them).
    existing: tensors that exist before the step (parameters, buffers,
    batch): outputs sharing their storage are not the step's.
    saves: note who saves each tensor (saved-tensor hooks; a baseline's map).
    modules: the named modules to hook (the plain model's); None hooks every
    module through torch's global module hooks.
    keys: how storages are named (StorageKeys.for_meter(meter)); weak
    references when None."""

    def __init__(self, names: dict[int, str], existing, saves: bool = False, modules=None,
                 keys: StorageKeys | None = None):
        super().__init__()
        self.names = names
        self.modules = modules
        self.keys = keys or _WEAK_KEYS
        self._existing_refs = [h for h in (self.keys.handle(t) for t in existing) if h is not None]
        self.existing = {h.key for h in self._existing_refs}
        self.stack: list[str | None] = []
        self.made: dict[int, _Made] = {}          # storage key -> what made it (forward)
        self.back_made: dict[int, _Made] = {}     # storage key -> what made it (backward, every op)
        self.counts: Counter = Counter()
        self.saved_by: dict[int, set[str]] = {}
        self.module_inputs: dict[str, dict[int, _Made]] = {}  # path -> {id: forward storages it took in}
        self.phase = "forward"
        self.recomputed_ops = 0
        self.recomputed_op_names: Counter = Counter()
        self.recomputed_modules: set[str] = set()
        self.regions: list[str] = []               # one entry per region call, by its root module
        self._recomputed: dict[int, _Made] = {}   # storage key -> what the recompute made
        self.recomputed_keys: set[tuple[str, str, int]] = set()  # (module, op, index) the recompute made
        self._held: list[Held] | None = None
        self._state: list[Held] = []
        self.forward_live: int | None = None
        self._kept: list[Held] | None = None
        self._alive_next: list[_Made] | None = None   # this step's storages alive at the next step's start
        self._holdovers: list[_Made] | None = None    # ... and gone by the start of the step after
        self._next_owners: dict[int, str] = {}        # id(_Made) -> who held it at the next step's start
        self._hooks = []
        self._saves = saves
        self._saved_ctx = None
        self._sac = None

    # -- the module stack ---------------------------------------------------
    def _where(self) -> str:
        for path in reversed(self.stack):
            if path is not None:
                return path
        return ROOT

    def _pre(self, module, args):
        path = self.names.get(id(module))
        if path is not None and self.phase == "backward":
            if all(p is None for p in self.stack):
                self.regions.append(path)
            self.recomputed_modules.add(path)
        elif path is not None and self.phase == "forward":
            seen = self.module_inputs.setdefault(path, {})
            for t in tree_leaves(args):
                if isinstance(t, torch.Tensor):
                    h = self.keys.handle(t)
                    made = self.made.get(h.key) if h is not None else None
                    if made is not None and made.alive():
                        seen[id(made)] = made
        self.stack.append(path)

    def _post(self, module, args, output):
        if self.stack:
            self.stack.pop()

    # -- saved tensors --------------------------------------------------------
    def _pack(self, t):
        h = self.keys.handle(t)
        if h is not None:
            self.saved_by.setdefault(h.key, set()).add(self._where())
        # Detached: a saved output holds no reference to its own grad_fn, as
        # autograd's SavedVariable does without hooks (no cycle to leak).
        return t.detach() if isinstance(t, torch.Tensor) else t

    @staticmethod
    def _unpack(t):
        return t

    def __enter__(self):
        if self.modules is None:
            self._hooks = [nn_module.register_module_forward_pre_hook(self._pre),
                           nn_module.register_module_forward_hook(self._post, always_call=True)]
        else:
            # Only named modules push onto the stack: a wrapper a run adds
            # has no name, and its ops count toward the named module around
            # it, as they do with a None on the stack for it.
            self._hooks = [h for m in self.modules for h in (m.register_forward_pre_hook(self._pre),
                                                             m.register_forward_hook(self._post, always_call=True))]
        if self._saves:
            self._saved_ctx = torch.autograd.graph.saved_tensors_hooks(_mark_pack(self._pack), self._unpack)
            self._saved_ctx.__enter__()
        self._sac = _sac_patch()
        if self._sac is not None:
            self._sac[0].__torch_dispatch__ = self._sac[2]
        return super().__enter__()

    def __exit__(self, *exc):
        try:
            return super().__exit__(*exc)
        finally:
            if self._sac is not None:
                self._sac[0].__torch_dispatch__ = self._sac[1]
                self._sac = None
            _PENDING.clear()
            if self._saved_ctx is not None:
                self._saved_ctx.__exit__(*exc)
                self._saved_ctx = None
            for h in self._hooks:
                h.remove()
            self._hooks = []

    # -- ops --------------------------------------------------------------------
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        declared = False
        if _PENDING:
            declared = _PENDING[0] is func and _PENDING[1]
            _PENDING.clear()
        if self.phase == "between":
            return out
        recompute = self.phase == "backward" and torch.is_grad_enabled()
        if recompute:
            self.recomputed_ops += 1
            self.recomputed_op_names[str(func.overloadpacket)] += 1
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor):
                self._note_output(t, str(func.overloadpacket), recompute, declared)
        return out

    def _note_output(self, t, op, recompute, declared):
        ref = self.keys.handle(t)
        if ref is None or ref.key in self.existing:
            return
        backward = self.phase == "backward"
        if backward:
            made_by = self._recomputed if recompute else self.back_made
        else:
            made_by = self.made
        old = made_by.get(ref.key)
        if old is not None and old.alive():
            return  # a view of, or an in-place write to, a storage already counted
        if backward and not recompute:
            old = self._recomputed.get(ref.key)
            if old is not None and old.alive():
                return
        module = self._where()
        key = (module, op, self.phase if not recompute else "recompute")
        made_by[ref.key] = _Made(ref, module, op, self.counts[key], ref.nbytes,
                                   declared and not backward, "forward" if not backward else "backward")
        if recompute:
            self.recomputed_keys.add((module, op, self.counts[key]))
        self.counts[key] += 1

    # -- phases -----------------------------------------------------------------
    def mark_end_forward(self, live: int | None = None, loss=None, modules=None, freed: int = 0) -> None:
        """Forward is done; `live`: the bytes the step's forward left live
        by the meter (what outside_ops_bytes() compares the map with);
        `freed`: the bytes of earlier steps' storages this forward let go
        (a model's last activation, rebound), which the meter's difference
        has taken off; `loss` and `modules` ([(path, module)] of the model,
        wrappers included) are where owners are looked for."""
        self.phase = "between"
        self.forward_live = None if live is None else live + freed
        owners = find_owners(modules or [], loss, self.keys) if modules is not None or loss is not None else {}
        self._held = [Held(m.module, m.op, m.index, m.nbytes, tuple(sorted(self.saved_by.get(k, ()))), m,
                           owner=owners.get(k, ("",))[0], declared=m.declared)
                      for k, m in self.made.items() if m.alive()]
        # State: what an owner holds that this step's forward did not make
        # (and that is not a parameter, buffer or the batch).
        self._state = []
        for k, (owner, ref, nbytes) in owners.items():
            if k in self.made or k in self.existing or not ref.alive():
                continue
            self._state.append(Held(owner, "state", 0, nbytes, (), owner=owner))

    def backward_starts(self) -> None:
        self.phase = "backward"
        self.stack = []

    def after_backward(self) -> None:
        self.phase = "done"
        self._kept = [Held(m.module, m.op, m.index, m.nbytes, ())
                      for k, m in self._recomputed.items() if m.alive() and k not in self.existing
                      and k not in self.made]

    # -- survival (called by the following steps) -------------------------------
    def _born(self) -> list[_Made]:
        return [*self.made.values(), *self._recomputed.values(), *self.back_made.values()]

    def next_step_starts(self, modules=None) -> None:
        """The next step starts (its gradients dropped, garbage collected):
        which of this step's storages are still alive, and who holds them
        (`modules`: [(path, module)], as for mark_end_forward)."""
        self._alive_next = [m for m in self._born() if m.alive()]
        owners = find_owners(modules or [], keys=self.keys)
        self._next_owners = {id(m): owners[m.ref.key][0] for m in self._alive_next if m.ref.key in owners}

    def next_forward_ends(self) -> int:
        """The next step's forward ended: this step's held storages still
        alive are state (kept from step to step), not this step's extras.
        Returns the bytes of this step's storages that were alive when the
        next step started and are gone now (that forward freed them)."""
        for h in self._held or []:
            h.survives = h.made.alive()
        return sum(m.nbytes for m in self._alive_next or [] if not m.alive())

    def next_step_ends(self) -> None:
        """The step after this one's successor starts: what was alive at the
        next step's start and is gone now was held over one step."""
        if self._alive_next is not None:
            self._holdovers = [m for m in self._alive_next if not m.alive()]

    def outside_ops_bytes(self) -> int:
        """The forward's live bytes that no op's output accounts for (0
        when no meter reading was given)."""
        if self.forward_live is None:
            return 0
        return max(0, self.forward_live - sum(h.nbytes for h in self.held()))

    def held(self) -> list[Held]:
        return list(self._held or [])

    def state(self) -> list[Held]:
        return list(self._state)

    def kept_after(self) -> list[Held]:
        return list(self._kept or [])

    def holdovers(self) -> list[Held] | None:
        if self._holdovers is None:
            return None
        return [Held(m.module, m.op, m.index, m.nbytes, (), phase=m.phase, owner=self._next_owners.get(id(m), ""))
                for m in self._holdovers]


def _inside(path: str, roots) -> bool:
    return any(path == r or path.startswith(r + ".") for r in roots)


def _model_owned(owner: str) -> bool:
    """Held by the model itself (a module attribute or a hook), not by an
    autograd Function's ctx (which a checkpoint of its region drops)."""
    return bool(owner) and not owner.startswith("ctx of ")


Key = tuple[str, str, int]   # (module, op, index): one storage a step's forward made


@dataclasses.dataclass
class Summary:
    """A map once its step is done, as plain data (it crosses processes:
    a distributed rank's map goes to the launcher)."""
    held: list[Held]
    inputs: dict[str, dict[Key, int]]   # module path -> {its inputs made by forward ops: bytes}
    regions: list[str]
    recomputed_modules: set[str]
    recomputed_keys: set[Key]
    recomputed_ops: int
    kept: list[Held]
    outside_ops_bytes: int
    state: list[Held] = dataclasses.field(default_factory=list)
    holdovers: list[Held] | None = None   # None: not known (the last step, or one step only)


def _key(h) -> Key:
    return (h.module, h.op, h.index)


def _phase_key(h) -> tuple[str, str, str, int]:
    return (h.phase, h.module, h.op, h.index)


def summarize(m: MemoryMap) -> Summary:
    """The map as plain data; call once what the following steps tell
    (survival, holdovers) has been noted on it."""
    held = [dataclasses.replace(h, made=None) for h in m.held()]
    inputs = {path: {(x.module, x.op, x.index): x.nbytes for x in made.values()}
              for path, made in m.module_inputs.items()}
    return Summary(held, inputs, list(m.regions), set(m.recomputed_modules), set(m.recomputed_keys),
                   m.recomputed_ops, m.kept_after(), m.outside_ops_bytes(), m.state(), m.holdovers())


@dataclasses.dataclass
class Statement:
    """What a correct checkpoint of a run's recomputed regions holds at the
    end of forward, from the baseline's map and the run's declared policy
    (see the module docstring)."""
    baseline_held: int          # measured: baseline_0's bytes held at the end of forward
    recomputed_bytes: int       # what only the recomputed regions' ops saved, made inside them
    outside_ops_bytes: int      # what the run's forward allocated outside every op (RNG stashes, bookkeeping)
    regions: int
    recomputed_ops: int
    modules: tuple[str, ...]    # region roots, in order, once each
    dropped: list[Held]         # the baseline's tensors a checkpoint recomputes
    declared: list[Held]        # what the run's selective policy declared saved that the baseline does not hold
    input_bytes: int = 0        # the regions' inputs that the baseline does not hold at the end of forward
    state: list[Held] = dataclasses.field(default_factory=list)  # born in this forward, kept from step to step

    @property
    def policy_bytes(self) -> int:
        return sum(h.nbytes for h in self.declared)

    @property
    def state_bytes(self) -> int:
        return sum(h.nbytes for h in self.state)

    @property
    def bytes(self) -> int:
        return (self.baseline_held - self.recomputed_bytes + self.outside_ops_bytes + self.policy_bytes
                + self.input_bytes + self.state_bytes)

    def text(self) -> str:
        # Three modules named, the rest counted: a statement read at a glance.
        mods = ", ".join(self.modules[:3]) + (f" and {len(self.modules) - 3} more" if len(self.modules) > 3 else "")
        if len(mods) > 140:
            mods = mods[:137] + "..."
        return (f"the baseline holds {self.baseline_held} B at the end of forward; {self.recomputed_bytes} B of it "
                f"({len(self.dropped)} tensor(s)) are made and saved only inside the {self.regions} region(s) "
                f"this run recomputes ({mods or 'none'}); plus {self.input_bytes} B of region inputs the baseline "
                f"lets go, {self.outside_ops_bytes} B its forward allocated outside every op (RNG stashes) and "
                f"{self.policy_bytes} B its selective policy declares saved ({len(self.declared)} tensor(s)), "
                f"{self.state_bytes} B of state it made and keeps from step to step: {self.bytes} B "
                f"stated")


def statement(baseline: Summary, run: Summary, baseline_held: int) -> Statement:
    """The statement for `run` from `baseline`'s map of the same step (the
    baseline's taken with saves=True). It is drawn from the baseline and
    the run's declared policy alone: the baseline's tensors that the run's
    recompute made again and that only ops inside its recomputed regions
    saved (and that the model itself does not keep: a module attribute, a
    hook) come off; the regions' inputs the baseline let go, what the run's
    forward allocated outside every op (RNG and autocast stashes: its live
    bytes at the end of forward less its map's) and what a selective
    policy declared saved come on. Nothing else the run made is credited."""
    roots = list(dict.fromkeys(run.regions))
    recomputed = set(run.recomputed_modules) | set(roots)
    inputs: dict[Key, int] = {}
    for root in roots:
        inputs.update(baseline.inputs.get(root, {}))
    held_keys = {_key(h) for h in baseline.held}
    declared_keys = {_key(h) for h in run.held if h.declared}
    dropped = [h for h in baseline.held
               if _key(h) in run.recomputed_keys and h.saved_by and not _model_owned(h.owner)
               and all(_inside(s, recomputed) for s in h.saved_by) and _key(h) not in inputs
               and _key(h) not in declared_keys]
    # A region keeps its inputs; one the baseline let go before the end of
    # forward (it saved a copy, say) is held by the checkpoint alone.
    extra_inputs = sum(nbytes for k, nbytes in inputs.items() if k not in held_keys)
    declared = [h for h in run.held if h.declared and _key(h) not in held_keys]
    state = [h for h in _unmatched(baseline, run) if _is_state(h)]
    return Statement(baseline_held, sum(h.nbytes for h in dropped), run.outside_ops_bytes,
                     len(run.regions), run.recomputed_ops, tuple(roots), dropped, declared, extra_inputs, state)


def _unmatched(baseline: Summary, run: Summary) -> list[Held]:
    """The run's storages alive at the end of forward, born in it, that the
    baseline's same step does not hold (by module, op and occurrence) and
    that are no region input and no declared save: each is state or an extra."""
    held_keys = {_key(h) for h in baseline.held}
    inputs: set[Key] = set()
    for root in dict.fromkeys(run.regions):
        inputs.update(baseline.inputs.get(root, {}))
    return [h for h in run.held
            if h.nbytes and _key(h) not in held_keys and _key(h) not in inputs and not h.declared]


def _is_state(h: Held) -> bool:
    """Outlives the next step's forward; on the last step (survival not
    known) a tensor kept on a module attribute or a hook is given the
    benefit of the doubt."""
    return bool(h.survives) or (h.survives is None and _model_owned(h.owner))


def still_held(stmt: Statement, run: Summary) -> list[Held]:
    """The run's tensors alive at the end of forward that the statement
    says a checkpoint recomputes (matched by module, op and occurrence)."""
    dropped = {_key(h) for h in stmt.dropped}
    return sorted((h for h in run.held if _key(h) in dropped), key=lambda h: -h.nbytes)


def extras(baseline: Summary, run: Summary) -> list[Held]:
    """(b): storages born in the run's forward and alive at its end that
    the baseline's same step does not hold, that are no region input, no
    declared save and no state (_is_state): a clone, a copy, a kept
    graph, a side store. Biggest first."""
    return sorted((h for h in _unmatched(baseline, run) if not _is_state(h)), key=lambda h: -h.nbytes)


def state_of(run: Summary) -> list[Held]:
    """(c), reported: what an owner holds that was born before this step's
    forward, and what this step's forward made that outlives the next one's."""
    born = [dataclasses.replace(h, module=h.owner or h.module, op="state") for h in run.held
            if h.nbytes and h.survives]
    return sorted([*run.state, *born], key=lambda h: -h.nbytes)


def holdovers(baseline: Summary, run: Summary) -> list[Held] | None:
    """Storages born in the run's step (forward or backward, clones
    included) alive at the next step's start and gone by the one after,
    less those the baseline's same step holds over too (a model's own
    last activation); None when not known (the last step)."""
    if run.holdovers is None:
        return None
    ours = {_phase_key(h) for h in baseline.holdovers or []}
    # The same owner holding one over in the baseline (a model's last
    # activation, rebound by the recompute in the run) is the model's state.
    owned = {h.owner for h in baseline.holdovers or [] if h.owner}
    return sorted((h for h in run.holdovers if h.nbytes and _phase_key(h) not in ours and h.owner not in owned),
                  key=lambda h: -h.nbytes)


@dataclasses.dataclass
class StepFinding:
    """One step of a run against the same step of baseline_0."""
    step: int
    held: int
    baseline_held: int
    statement: Statement
    still: list[Held]
    extras: list[Held]
    holdovers: list[Held] | None
    state: list[Held]
    declared: list[Held] = dataclasses.field(default_factory=list)  # every save its policy declared

    @property
    def extra_bytes(self) -> int:
        return sum(h.nbytes for h in self.extras)

    @property
    def kept_bytes(self) -> int:
        return sum(h.nbytes for h in self.holdovers or [])

    def finding(self, floor: int = FLOOR_BYTES) -> bool:
        return (self.extra_bytes > floor or self.held > self.statement.bytes + floor
                or self.kept_bytes > floor)


def judge_steps(base_steps: list[tuple[Summary, int]], run_steps: list[tuple[Summary, int]]) -> list[StepFinding]:
    """Each step of the run against the same step of the baseline:
    [(summary, held bytes at the end of forward by the meter)] each."""
    out = []
    for k, ((base, base_held), (run, held)) in enumerate(zip(base_steps, run_steps), start=1):
        stmt = statement(base, run, base_held)
        out.append(StepFinding(k, held, base_held, stmt, still_held(stmt, run), extras(base, run),
                               holdovers(base, run), state_of(run), [h for h in run.held if h.declared]))
    return out


def describe(tensors: list[Held], limit: int = 400) -> str:
    """'N tensor(s), B B: module op#k (n B, held by OWNER); ...' biggest
    first, within `limit` characters: '; ' between tensors, so a reader
    can list them (summary.json does)."""
    parts, total = [], sum(h.nbytes for h in tensors)
    for h in sorted(tensors, key=lambda h: -h.nbytes):
        who = f", held by {h.owner}" if h.owner and h.owner != h.module else ""
        what = f"{h.module} ({h.nbytes} B)" if h.op == "state" else f"{h.module} {h.op}#{h.index} ({h.nbytes} B{who})"
        if h.phase == "backward":
            what = f"{h.module} {h.op}#{h.index} made in backward ({h.nbytes} B{who})"
        if sum(len(p) + 2 for p in parts) + len(what) > limit:
            parts.append(f"and {len(tensors) - len(parts)} more")
            break
        parts.append(what)
    return f"{len(tensors)} tensor(s), {total} B: " + "; ".join(parts) if tensors else ""


# Every numeric attribute run_attrs() writes: a distributed run's are
# judged rank by rank (ranks/<r>/memory), never as a maximum over ranks.
STEP_ATTRS = ("memory.steps_judged", "memory.judged_step", "memory.stated_end_forward_bytes",
              "memory.judged_held_bytes", "memory.judged_baseline_held_bytes", "memory.max_saving_bytes",
              "memory.saving_step", "memory.max_baseline_held_bytes", "memory.floor_bytes", "memory.recomputed_ops",
              "memory.recompute_regions",
              "memory.stated_recomputed_bytes", "memory.outside_ops_bytes", "memory.declared_bytes",
              "memory.extra_bytes", "memory.extra_tensors", "memory.still_held_bytes", "memory.state_bytes",
              "memory.kept_after_backward_bytes")
TEXT_ATTRS = ("memory_statement", "memory_extra", "memory_still_held", "memory_kept", "memory_state",
              "memory_declared")


def run_attrs(findings: list[StepFinding]) -> dict:
    """The run's memory findings as report attributes (docs/schema.md,
    "Memory statement of a user's run"). The figures and names are those
    of the judged step: the first step with a finding above the floor,
    else the step whose held bytes come closest to (or furthest above) its
    statement; `max_saving_bytes` is over every step (a checkpoint that
    saves nothing saves nothing on any step)."""
    if not findings:
        return {}
    flagged = [f for f in findings if f.finding()]
    j = flagged[0] if flagged else max(findings, key=lambda f: (f.held - f.statement.bytes, -f.step))
    saving = max(findings, key=lambda f: (f.baseline_held - f.held, -f.step))
    unknown_kept = all(f.holdovers is None for f in findings)
    attrs = {"memory.steps_judged": len(findings), "memory.judged_step": j.step,
             "memory.stated_end_forward_bytes": j.statement.bytes, "memory.judged_held_bytes": j.held,
             "memory.judged_baseline_held_bytes": j.baseline_held,
             "memory.max_saving_bytes": saving.baseline_held - saving.held, "memory.saving_step": saving.step,
             "memory.max_baseline_held_bytes": max(f.baseline_held for f in findings),
             "memory.floor_bytes": FLOOR_BYTES,
             "memory.recomputed_ops": sum(f.statement.recomputed_ops for f in findings),
             "memory.recompute_regions": j.statement.regions,
             "memory.stated_recomputed_bytes": j.statement.recomputed_bytes,
             "memory.outside_ops_bytes": j.statement.outside_ops_bytes,
             "memory.declared_bytes": j.statement.policy_bytes,
             "memory.extra_bytes": j.extra_bytes, "memory.extra_tensors": len(j.extras),
             "memory.still_held_bytes": sum(h.nbytes for h in j.still),
             "memory.state_bytes": sum(h.nbytes for h in j.state),
             "memory_statement": f"step {j.step}: {j.statement.text()}"}
    if not unknown_kept:
        attrs["memory.kept_after_backward_bytes"] = j.kept_bytes
    for key, tensors in (("memory_extra", j.extras), ("memory_still_held", j.still),
                         ("memory_kept", j.holdovers or []), ("memory_state", j.state),
                         ("memory_declared", j.declared or saving.declared)):
        if tensors:
            attrs[key] = describe(tensors)
    return attrs


def statement_attrs(baseline: Summary, run: Summary, baseline_held: int, held: int | None = None) -> dict:
    """One mapped step's statement as report attributes (a distributed
    rank, a compiled run mapped in one eager step): judge_steps over that
    step alone. Holdovers are not known from one step: the recomputed
    activations it kept after backward (the old rule) stand in."""
    base = dataclasses.replace(baseline)
    mine = dataclasses.replace(run)
    if mine.holdovers is None:
        stmt = statement(base, mine, baseline_held)
        dropped = {_key(h) for h in stmt.dropped}
        mine.holdovers = [h for h in run.kept if _key(h) in dropped]
        base.holdovers = []
    return run_attrs(judge_steps([(base, baseline_held)], [(mine, held if held is not None else baseline_held)]))


def write_map(file, summary: Summary, run: str, step: str = "step 1 (recorded)") -> None:
    """The baseline's map into the report at /memory_map (docs/schema.md):
    one row per storage alive at the end of its forward, in the order the
    ops made them: module, op, index, bytes, saved_by (';'-joined), owner."""
    import h5py
    import numpy as np
    held = summary.held
    group = file.require_group("memory_map")
    group.attrs["run"] = run
    group.attrs["step"] = step
    group.attrs["tensors"] = len(held)
    group.attrs["bytes"] = sum(h.nbytes for h in held)
    text = h5py.string_dtype()
    for name, values, dtype in (("module", [h.module for h in held], text), ("op", [h.op for h in held], text),
                                ("index", [h.index for h in held], np.int64),
                                ("bytes", [h.nbytes for h in held], np.int64),
                                ("saved_by", [";".join(h.saved_by) for h in held], text),
                                ("owner", [h.owner for h in held], text)):
        if name in group:
            del group[name]
        group.create_dataset(name, data=np.array(values, dtype=dtype), dtype=dtype)
