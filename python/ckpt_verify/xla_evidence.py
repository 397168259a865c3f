"""Compiler evidence for a checkpoint on XLA: what XLA did to the recompute.

Reads the text XLA itself writes when XLA_FLAGS has --xla_dump_to and
--xla_dump_hlo_as_text (docs/xla.md lists the files):

  *.before_optimizations.txt      the program torch_xla handed to XLA
  *.after_optimizations.txt       the program XLA compiled (fusions and all)
  *after_optimizations-buffer-assignment.txt
                                  XLA's buffer assignment of that program

and turns them into numbers (no constant is made up here):

  recompute ops      instructions whose metadata op_name carries the tag
                     the XLA frontend put on every op that ran as a
                     recompute (RECOMPUTE_TAG + region number), or, for a
                     program JAX lowered, JAX's own name-stack entry
                     `rematted_computation` (mark_jax), counted in
                     the unoptimized program and in the optimized one, fused
                     computations included (an op XLA fused survives, an op
                     CSE merged into the forward's twin is gone);
  opt-barriers       `opt-barrier` instructions of the unoptimized program,
                     and each value they hold, classed by its users: a held
                     value read (through its get-tuple-element) by a
                     recompute op is a recompute input, any other is "other",
                     whose bytes are the barrier's cost;
  bytes              the buffer assignment's allocations summed by kind
                     (parameter, live-out, preallocated temp) and its
                     "Total bytes used".

Pure text processing: no torch, no torch_xla."""
import os
import re
from dataclasses import dataclass, field

RECOMPUTE_TAG = "ckptv_recompute_"
BACKWARD_TAG = "ckptv_backward_"

# Instructions that move or name values rather than compute them; a fusion
# is counted by the ops of its fused computation, not as one more.
_NOT_COMPUTE = frozenset({"parameter", "constant", "tuple", "get-tuple-element", "opt-barrier", "bitcast", "fusion"})
_HEAD = re.compile(r"^\s*(?:ROOT\s+)?%?(?P<name>[\w.\-]+)\s*=\s*")
_COMPUTATION = re.compile(r"^\s*(?:ENTRY\s+)?%?(?P<name>[\w.\-]+)\s*[({]")
_TAG = re.compile(re.escape(RECOMPUTE_TAG) + r"(\d+)")
_BTAG = re.compile(re.escape(BACKWARD_TAG) + r"(\d+)")
_BYTES = {"pred": 1, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2, "s32": 4, "u32": 4, "f32": 4,
          "s64": 8, "u64": 8, "f64": 8, "c64": 8, "c128": 16}


@dataclass
class Instruction:
    name: str
    shape: str
    opcode: str
    operands: list
    calls: list
    op_name: str
    computation: str
    attrs: str = ""
    # The recompute region this op was traced in, and the region whose
    # backward (after its recompute) it is; None when not. From the XLA
    # frontend's tags, or set by mark_jax.
    region: int | None = None
    backward_of: int | None = None

    def __post_init__(self) -> None:
        m = _TAG.search(self.op_name)
        self.region = int(m.group(1)) if m else None
        m = _BTAG.search(self.op_name)
        self.backward_of = int(m.group(1)) if m else None


@dataclass
class Module:
    computations: dict = field(default_factory=dict)   # name -> [Instruction]
    entry: str = ""
    scheduled: bool = False
    regions_known: bool = True    # False: recompute ops are marked, their regions are not (region 0)

    def instructions(self, computation: str | None = None) -> list:
        return self.computations.get(computation or self.entry, [])


def _balanced(text: str, start: int) -> int:
    """Index just past the bracket group opening at text[start]."""
    pairs = {"(": ")", "{": "}", "[": "]"}
    stack = []
    i = start
    while i < len(text):
        c = text[i]
        if c == '"':
            i = text.index('"', i + 1)
        elif c in pairs:
            stack.append(pairs[c])
        elif stack and c == stack[-1]:
            stack.pop()
            if not stack:
                return i + 1
        i += 1
    return len(text)


def _split_top(text: str) -> list:
    """Comma-separated parts at bracket depth 0."""
    parts, depth, cur = [], 0, []
    for c in text:
        if c in "({[":
            depth += 1
        elif c in ")}]":
            depth -= 1
        if c == "," and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(c)
    if "".join(cur).strip():
        parts.append("".join(cur).strip())
    return parts


def parse_instruction(line: str, computation: str) -> Instruction | None:
    m = _HEAD.match(line)
    if not m:
        return None
    rest = line[m.end():]
    if rest.startswith("("):
        end = _balanced(rest, 0)
    else:
        end = rest.find(" ")
    shape, rest = rest[:end].strip(), rest[end:].lstrip()
    op = re.match(r"([\w\-]+)\(", rest)
    if not op:
        return None
    close = _balanced(rest, op.end() - 1)
    listed = re.sub(r"/\*.*?\*/", " ", rest[op.end():close - 1])   # XLA's /*index=5*/ markers
    operands = [p.split()[-1].lstrip("%") for p in _split_top(listed) if p.split()]
    attrs = rest[close:]
    calls = [c.lstrip("%") for c in re.findall(r"(?:calls|to_apply)=(%?[\w.\-]+)", attrs)]
    op_name = re.search(r'metadata=\{([^}]*)\}', attrs)
    return Instruction(m.group("name"), shape, op.group(1), operands, calls, op_name.group(1) if op_name else "",
                       computation, attrs)


def parse_module(text: str) -> Module:
    """The computations of an HLO module in XLA's text form."""
    mod = Module()
    current = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("HloModule"):
            mod.scheduled = "is_scheduled=true" in stripped
            continue
        if not stripped or stripped.startswith("//"):
            continue
        if stripped == "}":
            current = None
            continue
        if current is None:
            m = _COMPUTATION.match(stripped)
            if m and stripped.endswith("{"):
                current = m.group("name")
                mod.computations[current] = []
                if stripped.startswith("ENTRY"):
                    mod.entry = current
            continue
        inst = parse_instruction(line, current)
        if inst is not None:
            mod.computations[current].append(inst)
    return mod


def _reachable(mod: Module) -> list:
    """Every instruction the entry computation runs, called computations
    (fusions, reductions' to_apply) included, each computation once."""
    seen, out, todo = set(), [], [mod.entry]
    while todo:
        comp = todo.pop()
        if comp in seen or comp not in mod.computations:
            continue
        seen.add(comp)
        for inst in mod.computations[comp]:
            out.append(inst)
            todo.extend(inst.calls)
    return out


def compute_ops(mod: Module) -> list:
    return [i for i in _reachable(mod) if i.opcode not in _NOT_COMPUTE]


def recompute_ops_by_region(mod: Module) -> dict:
    """{region: number of recompute ops} over everything the program runs."""
    out: dict = {}
    for inst in compute_ops(mod):
        r = inst.region
        if r is not None:
            out[r] = out.get(r, 0) + 1
    return out


def _tags(mod: Module, inst: Instruction) -> tuple:
    """(recompute regions, backward regions) of an instruction, fused ones included."""
    inner = [inst] + [i for c in inst.calls for i in mod.computations.get(c, [])]
    return ({i.region for i in inner if i.region is not None},
            {i.backward_of for i in inner if i.backward_of is not None})


def regions_scheduled_early(mod: Module) -> int:
    """In a scheduled module (is_scheduled=true: the entry lists its
    instructions in execution order), the regions k >= 2 whose first
    recompute op runs before the first op of region k-1's backward, which
    computes region k's incoming gradient: a recompute moved up into the
    forward, where it holds its activations as the forward would."""
    first_r: dict = {}
    first_b: dict = {}
    for pos, inst in enumerate(mod.instructions()):
        rs, bs = _tags(mod, inst)
        for r in rs:
            first_r.setdefault(r, pos)
        for b in bs:
            first_b.setdefault(b, pos)
    return sum(1 for k, pos in first_r.items() if k >= 2 and k - 1 in first_b and pos < first_b[k - 1])


def shape_bytes(shape: str) -> int:
    """Bytes of an array shape (f32[4,16]{1,0}) or the sum over a tuple."""
    total = 0
    for kind, dims in re.findall(r"\b([a-z]+\d*)\[([\d,]*)\]", shape):
        if kind not in _BYTES:
            continue
        n = 1
        for d in filter(None, dims.split(",")):
            n *= int(d)
        total += n * _BYTES[kind]
    return total


@dataclass
class Barriers:
    count: int = 0
    held_recompute_inputs: int = 0
    held_gradients: int = 0
    held_other: int = 0
    held_other_bytes: int = 0
    other_values: list = field(default_factory=list)   # "name shape (producer opcode)"


def barriers(mod: Module) -> Barriers:
    """The entry's opt-barriers and the values they hold, classed by users."""
    entry = mod.instructions()
    by_name = {i.name: i for i in entry}
    users: dict = {}
    for inst in entry:
        for op in inst.operands:
            users.setdefault(op, []).append(inst)
    # A recompute op may sit inside a fusion: a fusion reads a value for a
    # recompute op when its called computation holds one.
    tagged_comps = {c for c, insts in mod.computations.items() if any(i.region is not None for i in insts)}

    def is_recompute(inst: Instruction) -> bool:
        return inst.region is not None or any(c in tagged_comps for c in inst.calls)

    def is_region_backward(inst: Instruction) -> bool:
        return inst.backward_of is not None

    out = Barriers()
    for inst in entry:
        if inst.opcode != "opt-barrier":
            continue
        out.count += 1
        packed = len(inst.operands) == 1 and by_name.get(inst.operands[0]) is not None \
            and by_name[inst.operands[0]].opcode == "tuple"
        elements = by_name[inst.operands[0]].operands if packed else inst.operands
        for index, value in enumerate(elements):
            outs = [u for u in users.get(inst.name, []) if u.opcode == "get-tuple-element"
                    and re.search(rf"\bindex={index}\b", u.attrs)]
            if not packed and len(elements) == 1:
                outs = [inst]
            readers = [r for o in outs for r in users.get(o.name, [])]
            if any(is_recompute(r) for r in readers):
                out.held_recompute_inputs += 1
            elif readers and any(is_region_backward(r) for r in readers):
                out.held_gradients += 1
            else:
                out.held_other += 1
                producer = by_name.get(value)
                shape = producer.shape if producer else ""
                out.held_other_bytes += shape_bytes(shape)
                out.other_values.append(f"{value} {shape} ({producer.opcode if producer else '?'})")
    return out


def load(text: str) -> Module:
    return parse_module(text)


# JAX names what it lowers by its name stack (op_name="jit(step)/...").
# The backward of a jax.checkpoint is `transpose(jvp(...))/checkpoint/...`
# and the forward it replays in there `.../checkpoint/rematted_computation/...`
# (any policy, prevent_cse or not).
JAX_RECOMPUTE = "/rematted_computation/"
JAX_CHECKPOINT = "/checkpoint/"


def mark_jax(mod: Module, number_regions: bool) -> Module:
    """Marks a JAX program's recompute instructions (op_name with
    `rematted_computation`) and its checkpoints' backward ones (`checkpoint`
    without it). JAX gives every checkpoint the same name, so regions are
    told apart by data flow: with number_regions, each connected group of
    recompute instructions (one reads another's value) is one region,
    numbered in program order; that holds for the program JAX emitted
    (one replay per checkpoint call). After XLA's passes a replay may be
    split or fused, so the optimized program is marked with region 0 only
    (regions_known False)."""
    parent: dict = {}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for comp, insts in mod.computations.items():
        for inst in insts:
            recompute = JAX_RECOMPUTE in inst.op_name
            inst.region = 0 if recompute else None
            inst.backward_of = 0 if not recompute and JAX_CHECKPOINT in inst.op_name else None
            if recompute:
                parent[(comp, inst.name)] = (comp, inst.name)
    mod.regions_known = number_regions
    if not number_regions:
        return mod
    for comp, insts in mod.computations.items():
        for inst in insts:
            if inst.region is None:
                continue
            for op in inst.operands:
                if (comp, op) in parent:
                    parent[find((comp, op))] = find((comp, inst.name))
    numbers: dict = {}
    for inst in _reachable(mod):
        if inst.region is not None:
            root = find((inst.computation, inst.name))
            inst.region = numbers.setdefault(root, len(numbers) + 1)
    return mod


@dataclass
class BufferBytes:
    total: int = 0          # "Total bytes used"
    parameter: int = 0
    live_out: int = 0
    temp: int = 0


def buffer_bytes(text: str) -> BufferBytes:
    """XLA's buffer assignment, summed by allocation kind."""
    out = BufferBytes()
    for m in re.finditer(r"^allocation \d+: size (\d+), ([^\n]*)$", text, re.M):
        size, what = int(m.group(1)), m.group(2)
        if what.startswith("parameter"):
            out.parameter += size
        elif "preallocated-temp" in what:
            out.temp += size
        elif "maybe-live-out" in what or "output" in what:
            out.live_out += size
    total = re.search(r"^Total bytes used: (\d+)", text, re.M)
    out.total = int(total.group(1)) if total else out.parameter + out.live_out + out.temp
    return out


@dataclass
class Evidence:
    """One compiled step program's evidence, as recorded under /runs/<run>/xla."""
    module: str = ""
    regions: int = 0
    recompute_ops_unoptimized: dict = field(default_factory=dict)
    recompute_ops_optimized: dict = field(default_factory=dict)
    ops_unoptimized: int = 0
    ops_optimized: int = 0
    barriers_unoptimized: Barriers = field(default_factory=Barriers)
    barriers_optimized: int = 0
    scheduled_early: int = -1     # -1: the optimized module is not scheduled
    bytes: BufferBytes = field(default_factory=BufferBytes)

    regions_known_optimized: bool = True   # False (JAX): the optimized count is one total, under region 0

    @property
    def regions_merged(self) -> int:
        """Regions whose traced recompute left no op in the optimized program
        (where the optimized program does not tell regions apart: all of
        them when no recompute op is left, else none)."""
        if not self.regions_known_optimized:
            left = sum(self.recompute_ops_optimized.values())
            return 0 if left else sum(1 for n in self.recompute_ops_unoptimized.values() if n)
        return sum(1 for r, n in self.recompute_ops_unoptimized.items()
                   if n and not self.recompute_ops_optimized.get(r))

    def attrs(self) -> dict:
        """Flat run attributes (recorder: "xla.<key>")."""
        b = self.barriers_unoptimized
        out = {
            "xla.module": self.module,
            "xla.regions": self.regions,
            "xla.regions_merged": self.regions_merged,
            "xla.recompute_ops_unoptimized": sum(self.recompute_ops_unoptimized.values()),
            "xla.recompute_ops_optimized": sum(self.recompute_ops_optimized.values()),
            "xla.ops_unoptimized": self.ops_unoptimized,
            "xla.ops_optimized": self.ops_optimized,
            "xla.barriers": b.count,
            "xla.barriers_optimized": self.barriers_optimized,
            "xla.regions_scheduled_early": self.scheduled_early,
            "xla.barrier_recompute_inputs": b.held_recompute_inputs,
            "xla.barrier_gradients": b.held_gradients,
            "xla.barrier_other_values": b.held_other,
            "xla.barrier_other_bytes": b.held_other_bytes,
            "xla.total_bytes": self.bytes.total,
            "xla.parameter_bytes": self.bytes.parameter,
            "xla.live_out_bytes": self.bytes.live_out,
            "xla.temp_bytes": self.bytes.temp,
        }
        if b.other_values:
            out["xla.barrier_other"] = "; ".join(b.other_values[:8]) + (
                f"; ... {len(b.other_values) - 8} more" if len(b.other_values) > 8 else "")
        per_region = ""
        if self.regions_known_optimized:
            per_region = ", ".join(f"{r}:{self.recompute_ops_unoptimized[r]}->{self.recompute_ops_optimized.get(r, 0)}"
                                   for r in sorted(self.recompute_ops_unoptimized))
        elif self.recompute_ops_unoptimized:   # "1:18->?, 2:18->? (all: 72->80)"
            per_region = ", ".join(f"{r}:{self.recompute_ops_unoptimized[r]}->?"
                                   for r in sorted(self.recompute_ops_unoptimized))
            per_region += (f" (all: {sum(self.recompute_ops_unoptimized.values())}->"
                           f"{sum(self.recompute_ops_optimized.values())})")
        if per_region:
            out["xla.recompute_ops_per_region"] = per_region
        return out


def module_files(dump_dir: str) -> dict:
    """{module prefix: {"before": path, "after": path, "buffers": path}} of a dump."""
    out: dict = {}
    for name in sorted(os.listdir(dump_dir)):
        path = os.path.join(dump_dir, name)
        if name.endswith(".before_optimizations.txt"):
            out.setdefault(_prefix(name), {})["before"] = path
        elif name.endswith("after_optimizations-buffer-assignment.txt"):
            out.setdefault(_prefix(name), {})["buffers"] = path
        elif name.endswith("after_optimizations.txt"):
            out.setdefault(_prefix(name), {})["after"] = path
    return {k: v for k, v in out.items() if {"before", "after", "buffers"} <= set(v)}


def _prefix(name: str) -> str:
    """module_0007.SyncTensorsGraph.42.cpu_after_optimizations.txt -> module_0007.SyncTensorsGraph.42
    (torch_xla); module_0028.jit_step.cpu_after_optimizations.txt -> module_0028.jit_step (JAX)."""
    m = re.match(r"(module_\d+\.[^.]+(?:\.\d+)?)\.(?:before_optimizations|[a-z_]*after_optimizations)", name)
    return m.group(1) if m else name


def read_evidence(files: dict, regions: int, module: str, producer: str = "torch_xla") -> Evidence:
    """The evidence of one compiled program. producer "torch_xla": the XLA
    frontend's tags mark the recompute; "jax": JAX's own names (mark_jax)."""
    def text(kind: str) -> str:
        with open(files[kind], encoding="utf-8", errors="replace") as f:
            return f.read()

    before, after = load(text("before")), load(text("after"))
    if producer == "jax":
        mark_jax(before, number_regions=True)
        mark_jax(after, number_regions=False)
    ev = Evidence(module=module, regions=regions, regions_known_optimized=after.regions_known)
    ev.recompute_ops_unoptimized = recompute_ops_by_region(before)
    ev.recompute_ops_optimized = recompute_ops_by_region(after)
    ev.ops_unoptimized = len(compute_ops(before))
    ev.ops_optimized = len(compute_ops(after))
    ev.barriers_unoptimized = barriers(before)
    ev.barriers_optimized = sum(1 for i in _reachable(after) if i.opcode == "opt-barrier")
    if after.scheduled and after.regions_known:
        ev.scheduled_early = regions_scheduled_early(after)
    ev.bytes = buffer_bytes(text("buffers"))
    return ev


def step_module(dump_dir: str, names: list) -> str | None:
    """Of the modules `names` (compiled during one run), the training step:
    the one with the most instructions before optimization."""
    files = module_files(dump_dir)
    best, size = None, -1
    for n in names:
        if n in files:
            s = os.path.getsize(files[n]["before"])
            if s > size:
                best, size = n, s
    return best
