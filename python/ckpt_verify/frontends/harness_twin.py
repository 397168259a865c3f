"""The harness's own models (docs/models.md; harness/autograd/model.c and
ops.c are the reference) rebuilt in torch from nothing but a case's HDF5
report, and trained as the harness's runner trains them: the torch twin
that the cross-check, the external-run adapter and the torch benchmark
share.

Case(report) reads the resolved case (/case attributes), the inputs
(/inputs/x, /inputs/target) and the initial parameters (/params_init), and
refuses (CannotRebuild) a report whose /case/model_definition is not the
model rebuilt here. train(case, style) trains it for the case's steps:
plainly (torch_none), with checkpoint(use_reentrant=True)
(torch_reentrant), with checkpoint(use_reentrant=False)
(torch_nonreentrant), selectively (torch_selective: torch 2.x
create_selective_checkpoint_contexts with the case's policy as ATen ops),
or with the module-state replay the harness's references do
(torch_*_state_replay), segmented as the harness segments
(checkpoint_sequential's cut). Each run seeds the CPU generator with the
case seed first, as the harness does before every run; SGD is
p.add_(grad, alpha=-lr), the harness's update. A case on cuda:N runs on
that device, dropout drawn as the harness draws it on every device.
train() returns a RunRecord (recorder.py) with its per-step timings and
peaks beside."""
import math
import statistics
import time
from contextlib import nullcontext

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from ..errors import CannotRebuild
from ..recorder import RunRecord
from ..schema import attr_text, read_tensor

LAYER_NORM_EPS = 1e-5
# two_stream's residual scale, the non-tensor argument of its regions
# (harness/autograd/model.c TWO_STREAM_SCALE).
TWO_STREAM_SCALE = 0.5
RRELU_LOWER, RRELU_UPPER = 1.0 / 8.0, 1.0 / 3.0

# (harness run, torch run) pairs that are compared.
RUN_PAIRS = (("baseline_0", "torch_none"), ("reentrant", "torch_reentrant"),
             ("nonreentrant", "torch_nonreentrant"))
STYLES = {"torch_none": None, "torch_reentrant": True, "torch_nonreentrant": False}

# Models with buffers (docs/models.md): torch.utils.checkpoint recomputes
# their forward with the live buffers, so it updates them twice (PyTorch
# #96136) and a quantiser recomputes with the scale its forward already
# moved. The harness's references replay the state instead. For these
# models two more torch runs wrap each checkpointed segment in that replay
# (a copy of the buffers when its forward starts; the recompute reads and
# updates a copy of that copy), and the harness's runs must match those
# bitwise; against torch's plain checkpoints they must differ, in the
# buffers (STATE_CAUSE).
STATEFUL_MODELS = ("bn_mlp", "scaled_mlp")
STATE_STYLES = {"torch_reentrant_state_replay": True, "torch_nonreentrant_state_replay": False}
STATE_PAIRS = (("reentrant", "torch_reentrant_state_replay"),
               ("nonreentrant", "torch_nonreentrant_state_replay"))
STATE_CAUSE = ("torch.utils.checkpoint replays no module state: its recompute runs with the live buffers "
               "and updates them again (PyTorch #96136 for BatchNorm)")
BATCH_NORM_MOMENTUM, BATCH_NORM_EPS = 0.1, 1e-5

# Selective checkpointing (the harness's `selective` impl and its `policy`)
# against torch 2.x's create_selective_checkpoint_contexts: a non-reentrant
# checkpoint whose context_fn saves the outputs of the ATen ops that the
# policy's ops run as (MUST_SAVE) and recomputes the rest (PREFER_RECOMPUTE).
# The two cache different things (torch an op's output, the harness what an
# op saves for backward), which changes what is held, not what is computed:
# the gradients must agree bitwise. torch 1.13 has no such API: exit 77
# (skipped) with the reason when --selective asks for it.
SELECTIVE_STYLE = "torch_selective"
SELECTIVE_PAIR = ("selective", SELECTIVE_STYLE)
POLICY_ATEN_OPS = {
    "linear": ("addmm", "mm"),
    "causal_attention": ("bmm", "_softmax", "masked_fill"),
    "layer_norm": ("native_layer_norm",),
    "gelu": ("gelu",), "gelu_tanh": ("gelu",),
    "bias_gelu_fused": ("gelu",), "bias_gelu_fused_atomic": ("gelu",),
    "dropout": ("native_dropout", "bernoulli"),
    "bias_dropout_add": ("native_dropout", "bernoulli"),
    "rrelu": ("rrelu_with_noise",),
    "batch_norm": ("native_batch_norm", "_native_batch_norm_legit"),
}
POLICY_NAMED = {"save_matmuls": ("linear", "causal_attention")}


def has_selective_checkpointing():
    return hasattr(torch.utils.checkpoint, "create_selective_checkpoint_contexts")


def policy_ops(policy, model_ops=tuple(POLICY_ATEN_OPS)):
    """The harness's policy (cases/README.md `policy`) as ATen op names."""
    if policy == "attention_core":
        kept = [op for op in model_ops if op != "causal_attention"]
    elif policy in POLICY_NAMED:
        kept = POLICY_NAMED[policy]
    elif policy.startswith("save:"):
        kept = policy[5:].split(",")
    else:
        raise CannotRebuild(f"policy '{policy}' has no torch counterpart here")
    return {aten for op in kept for aten in POLICY_ATEN_OPS.get(op.strip(), ())}


def selective_context(policy):
    """context_fn for torch.utils.checkpoint (torch 2.x)."""
    import functools

    from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts
    saved = policy_ops(policy)

    def policy_fn(ctx, op, *args, **kwargs):
        name = getattr(getattr(op, "overloadpacket", op), "__name__", str(op))
        return CheckpointPolicy.MUST_SAVE if name in saved else CheckpointPolicy.PREFER_RECOMPUTE
    return functools.partial(create_selective_checkpoint_contexts, policy_fn)
FP8_E4M3_MAX, AMAX_HISTORY_LEN = 448.0, 4

# Differences planted on purpose, to show that the cross-check catches them
# (tests/crosscheck.cmake runs them and expects a failure).
PLANTS = {
    # SGD as `p -= lr * grad`: lr·grad is rounded on its own before the
    # subtraction, where ATen's add_(grad, alpha=-lr) (the harness's update)
    # rounds once (a fused multiply-add). Moves a few elements of the final
    # parameters by 1 ULP, and so step 2.
    "sgd_mul": "SGD computed as p -= lr * grad instead of p.add_(grad, alpha=-lr)",
    # Recompute draws fresh dropout masks: the bug torch's RNG stash exists for.
    "no_rng_preserve": "checkpoint(..., preserve_rng_state=False) although the case preserves it",
    # The state-replay runs replay nothing: torch's plain checkpoint again.
    "no_state_replay": "the *_state_replay runs recompute with the live buffers",
}


# ---- reading the report ---------------------------------------------------------

class Case:
    """The resolved case, as the report's /case attributes state it."""

    def __init__(self, f):
        a = {k: attr_text(v) for k, v in f["case"].attrs.items()}
        self.attrs = a
        self.name = a["name"]
        self.model = a["model"]
        self.layers = int(a["layers"])
        self.hidden = int(a["hidden"])
        self.heads = int(a["heads"])
        self.dropout = float(a["dropout"])
        self.fusion = a["fusion"]
        self.autocast = a["autocast"]
        self.steps = int(a["steps"])
        self.seed = int(a["seed"])
        self.lr = float(a["lr"])
        self.segments = 0 if a["segments"] == "every" else int(a["segments"])
        self.preserve_rng_state = a["preserve_rng_state"] == "true"
        self.input_requires_grad = a["input_requires_grad"] == "true"
        self.device = a["device"]
        # Checkpoints nested around each segment (reports before the key: 1).
        self.nest = int(a.get("nest", 1))
        # The harness records the intra-op thread count it actually used;
        # reductions split across threads, so use the same number.
        self.threads = int(f.attrs.get("threads", 0))
        self.param_names = list(f["params_init"].keys())
        self.params_init = {n: read_tensor(f["params_init"][n]) for n in self.param_names}
        # h5py lists names alphabetically; the model's order is by layer.
        self.param_names = [n for n in self.model_param_order() if n in self.params_init]
        missing = sorted(set(self.params_init) - set(self.param_names))
        if missing:
            raise CannotRebuild(f"{self.name}: parameters this rebuild does not use: {missing}")
        self.x = read_tensor(f["inputs/x"])
        self.target = read_tensor(f["inputs/target"])
        self.check_definition(a.get("model_definition", ""))

    def check_definition(self, text):
        """The report's own description of the model must be the one rebuilt
        here: a change to harness/autograd/model.c must not pass by unnoticed."""
        fusion_text = {"none": "add + gelu_tanh (ATen)", "bias_gelu": "fused_bias_gelu_tanh(",
                       "bias_gelu_atomic": "fused_bias_gelu_tanh (atomic dbias)"}
        want = {"mlp": [fusion_text.get(self.fusion, "?"), "dropout("],
                "rrelu_mlp": ["rrelu(", "1/8, 1/3, training", "dropout("],
                "branchy": ["gelu_tanh(x·b", ") + x, p="],
                "two_stream": [fusion_text.get(self.fusion, "?"), f"r = r + s·h (s={TWO_STREAM_SCALE:g}",
                               "x = dropout(h + c", "c = gelu_tanh(r) under no_grad"],
                "gpt_block": ["attn_causal(ln1(x)", fusion_text.get(self.fusion, "?"), "layer_norm eps=1e-5"],
                "bn_mlp": ["gelu_tanh(batch_norm_train(", "momentum=0.1, eps=1e-5", "dropout("],
                "scaled_mlp": ["bf16(clamp(x·s, ±448))/s", "s = 448/max(history) if > 0", "straight-through"]}
        layers = [line for line in text.splitlines() if line.startswith("layer ")]
        bad = [f"{len(layers)} layer lines for {self.layers} layers"] if len(layers) != self.layers else []
        bad += [f"no '{w}' in layer {i}" for i, line in enumerate(layers) for w in want[self.model] if w not in line]
        loss = "loss = mean((x + r - target)^2)" if self.model == "two_stream" else "loss = mean((x - target)^2)"
        if loss not in text:
            bad.append("no mse loss")
        if bad:
            raise CannotRebuild(f"{self.name}: /case/model_definition is not the model rebuilt "
                             f"here ({'; '.join(bad[:3])})")

    def model_param_order(self):
        names = []
        for i in range(self.layers):
            if self.model in ("mlp", "rrelu_mlp", "scaled_mlp", "two_stream"):
                parts = [f"l{i}."]
            elif self.model == "bn_mlp":
                parts = [f"l{i}.", f"l{i}.bn."]
            elif self.model == "branchy":
                parts = [f"b{i}.a.", f"b{i}.b."]
            elif self.model == "gpt_block":
                parts = [f"h{i}.{p}." for p in ("ln1", "attn.qkv", "attn.proj", "ln2", "mlp.fc", "mlp.proj")]
            else:
                raise CannotRebuild(f"{self.name}: model '{self.model}' is not rebuilt here")
            for p in parts:
                names += [p + "weight", p + "bias"]
        return names

    def initial_buffers(self):
        """The model's buffers at their initial values, in the harness's
        order (harness/autograd/model.c add_layer_buffers)."""
        S = {}
        for i in range(self.layers):
            if self.model == "bn_mlp":
                S[f"l{i}.bn.running_mean"] = torch.zeros(self.hidden)
                S[f"l{i}.bn.running_var"] = torch.ones(self.hidden)
            elif self.model == "scaled_mlp":
                S[f"l{i}.amax_history"] = torch.zeros(AMAX_HISTORY_LEN)
                S[f"l{i}.scale"] = torch.ones(1)
        return S

    def autocast_dtype(self):
        return {"off": None, "bf16": torch.bfloat16, "f16": torch.float16}[self.autocast]

    def plan_segments(self):
        """checkpoint_sequential's cut, as harness/train/runner.c plan_segments makes
        it: (checkpointed ranges, first layer that runs plainly)."""
        if self.segments == 0:
            return [(i, i + 1) for i in range(self.layers)], self.layers
        size = self.layers // self.segments
        ranges = [(s, s + size) for s in range(0, size * (self.segments - 1), size)]
        return ranges, size * (self.segments - 1)


# ---- the models (docs/models.md; harness/autograd/model.c) -----------------------------

def gelu_tanh(t):
    return F.gelu(t, approximate="tanh")


def bias_gelu(case, y, b):
    """bias + GELU(tanh) on a bias-free linear output. fusion none is the
    harness's ATen add then gelu, reproduced exactly. The fused kernels are
    the harness's own C code, which torch does not have: emulated as
    gelu(y + b) with the bias in y's dtype (the kernel casts it so), which
    rounds differently (see expected_differences)."""
    if case.fusion == "none":
        return gelu_tanh(y + b)
    # The kernel's contract (harness/autograd/fused_bias_gelu.h): the bias cast to y's
    # dtype, then widened with y to float32, added and GELU'd in float32,
    # rounded once to y's dtype. For float32 that is plain gelu(y + b).
    z = y.float() + b.to(y.dtype).float()
    return gelu_tanh(z).to(y.dtype)


def dropout(case, t):
    """F.dropout, or on CUDA with case.dropout_draw == "harness" the draw the
    harness makes on every device (harness/aten/aten_ops.cpp tensor_bernoulli):
    a mask of t's dtype from bernoulli_(1 - p), divided by 1 - p, times t.
    That is ATen's CPU dropout; torch's CUDA F.dropout is the fused
    native_dropout kernel instead (a bool mask, another draw), so a bitwise
    cross-check on CUDA draws as the harness does; timing comparisons
    (bench_vs_torch_gpu.py) keep torch's own F.dropout."""
    if not (t.is_cuda and getattr(case, "dropout_draw", "torch") == "harness"):
        return F.dropout(t, case.dropout, training=True)
    if case.dropout == 0:
        return t
    keep = 1.0 - case.dropout
    if keep == 0:
        return t * 0
    return t * (torch.empty_like(t, memory_format=torch.contiguous_format).bernoulli_(keep) / keep)


def linear_gelu(case, P, i, x):
    w, b = P[f"l{i}.weight"], P[f"l{i}.bias"]
    if case.fusion == "none":
        return gelu_tanh(F.linear(x, w, b))
    return bias_gelu(case, F.linear(x, w), b)


def mlp_layer(case, P, i, x):
    return dropout(case, linear_gelu(case, P, i, x))


def two_stream_layer(case, P, i, x, r, c, s):
    """(x, r, c) -> (x', r', c'), s a plain number: c' is made under no_grad."""
    h = linear_gelu(case, P, i, x)
    r = r + h * s
    x = dropout(case, h + c)
    with torch.no_grad():
        c = gelu_tanh(r)
    return x, r, c


def two_stream_layers(case, P, begin, end, x, r, c, s):
    for i in range(begin, end):
        x, r, c = two_stream_layer(case, P, i, x, r, c, s)
    return x, r, c


def rrelu_layer(case, P, i, x):
    y = F.linear(x, P[f"l{i}.weight"], P[f"l{i}.bias"])
    h = F.rrelu(y, RRELU_LOWER, RRELU_UPPER, training=True)
    return dropout(case, h)


def branchy_layer(case, P, i, x):
    a = gelu_tanh(F.linear(x, P[f"b{i}.a.weight"], P[f"b{i}.a.bias"]))
    b = F.linear(x, P[f"b{i}.b.weight"], P[f"b{i}.b.bias"])
    return dropout(case, a + b + x)


def bn_mlp_layer(case, P, S, i, x):
    y = F.linear(x, P[f"l{i}.weight"], P[f"l{i}.bias"])
    z = F.batch_norm(y.reshape(-1, case.hidden), S[f"l{i}.bn.running_mean"], S[f"l{i}.bn.running_var"],
                     P[f"l{i}.bn.weight"], P[f"l{i}.bn.bias"], training=True, momentum=BATCH_NORM_MOMENTUM,
                     eps=BATCH_NORM_EPS).reshape(y.shape)
    return dropout(case, gelu_tanh(z))


class FakeQuantize(torch.autograd.Function):
    """(x·s clamped to ±448, rounded to bfloat16) / s in float32; the
    gradient passes straight through (harness/aten tensor_fake_quantize)."""

    @staticmethod
    def forward(ctx, x, scale):
        q = (x.float() * scale).clamp(-FP8_E4M3_MAX, FP8_E4M3_MAX).to(torch.bfloat16).float()
        return (q / scale).to(x.dtype)

    @staticmethod
    def backward(ctx, grad):
        return grad, None


def delayed_scaling_update(history, scale, x):
    """The history shifts and takes max|x| first; scale = 448 / max(history)
    when positive (a true division, as the harness's update does)."""
    with torch.no_grad():
        amax = x.abs().max().float().reshape(1)
        history.copy_(torch.cat([amax, history[:-1]]))
        m = history.max()
        scale.copy_(torch.where(m > 0, torch.full_like(m, FP8_E4M3_MAX).div(m), scale))


def scaled_mlp_layer(case, P, S, i, x):
    q = FakeQuantize.apply(x, S[f"l{i}.scale"])
    delayed_scaling_update(S[f"l{i}.amax_history"], S[f"l{i}.scale"], x)
    h = gelu_tanh(F.linear(q, P[f"l{i}.weight"], P[f"l{i}.bias"]))
    return dropout(case, h)


def fp32_rule(t, rules):
    """harness/autograd/autocast.h runs softmax and layer norm in float32 under
    autocast (as torch's CUDA op lists do); torch 1.13's CPU autocast leaves
    both in their input's dtype. rules = "harness" applies the harness's rule."""
    if rules == "harness" and torch.is_autocast_cpu_enabled() and t.dtype in (torch.bfloat16, torch.float16):
        return t.float()
    return t


def causal_attention(case, qkv, rules):
    """softmax(mask(q·kᵀ / sqrt(d))) · v on a fused qkv projection."""
    B, T, C3 = qkv.shape
    C, H = C3 // 3, case.heads
    d = C // H
    # Heads made contiguous, as the harness's split_heads does: q·kᵀ then
    # multiplies by a transposed view of k. A strided copy instead takes a
    # different gemm path, which for bfloat16 rounds differently.
    q, k, v = (t.reshape(B, T, H, d).transpose(1, 2).contiguous() for t in qkv.split(C, dim=2))
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(d)
    mask = torch.ones(T, T, dtype=torch.bool, device=qkv.device).triu(1)
    scores = scores.masked_fill(mask, float("-inf"))
    probs = F.softmax(fp32_rule(scores, rules), dim=-1)
    return (probs @ v).transpose(1, 2).reshape(B, T, C)


def gpt_layer(case, P, i, x, rules):
    p = f"h{i}."
    C = case.hidden
    a = F.layer_norm(fp32_rule(x, rules), (C,), P[p + "ln1.weight"], P[p + "ln1.bias"], LAYER_NORM_EPS)
    att = causal_attention(case, F.linear(a, P[p + "attn.qkv.weight"], P[p + "attn.qkv.bias"]), rules)
    # bias_dropout_add: residual + dropout(y + b), ATen add, mul, add.
    x1 = x + dropout(case, F.linear(att, P[p + "attn.proj.weight"]) + P[p + "attn.proj.bias"])
    a2 = F.layer_norm(fp32_rule(x1, rules), (C,), P[p + "ln2.weight"], P[p + "ln2.bias"], LAYER_NORM_EPS)
    g = bias_gelu(case, F.linear(a2, P[p + "mlp.fc.weight"]), P[p + "mlp.fc.bias"])
    h = F.linear(g, P[p + "mlp.proj.weight"])
    return x1 + dropout(case, h + P[p + "mlp.proj.bias"])


def layers_forward(case, P, begin, end, x, rules, S=None):
    for i in range(begin, end):
        if case.model == "bn_mlp":
            x = bn_mlp_layer(case, P, S, i, x)
        elif case.model == "scaled_mlp":
            x = scaled_mlp_layer(case, P, S, i, x)
        elif case.model == "mlp":
            x = mlp_layer(case, P, i, x)
        elif case.model == "rrelu_mlp":
            x = rrelu_layer(case, P, i, x)
        elif case.model == "branchy":
            x = branchy_layer(case, P, i, x)
        else:
            x = gpt_layer(case, P, i, x, rules)
    return x


# ---- training -----------------------------------------------------------------

class RunResult(RunRecord):
    """A RunRecord with the per-step measurements the benchmarks read."""

    def __init__(self, name):
        super().__init__(name)
        self.forward_ms = []       # per step
        self.step_cpu_ms = []      # per step: process CPU time of forward + backward
        self.backward_ms = []
        self.peak_bytes = []       # per step: max of the two below
        self.forward_peak_bytes = []
        self.backward_peak_bytes = []
        self.note = ""


def backward(api, loss, leaves):
    """Each step's backward the way the case's `backward` key says
    (cases/README.md): loss.backward(), autograd.grad with the results set
    as .grad, backward(inputs=), or backward with retain_graph and again."""
    if api == "grad":
        for t, g in zip(leaves, torch.autograd.grad(loss, leaves, allow_unused=True)):
            t.grad = g
    elif api == "inputs":
        loss.backward(inputs=leaves)
    elif api == "twice":
        loss.backward(retain_graph=True)
        loss.backward()
    elif api == "loss":
        loss.backward()
    else:
        raise CannotRebuild(f"backward = {api}: not a backward call this script knows")


def styles_for(case):
    """The checkpoint styles to run: torch's reentrant checkpoint refuses
    grad() and backward(inputs=), so a case that calls those leaves it out
    (the harness refuses a reentrant impl there too)."""
    partial = case.attrs.get("backward", "loss") in ("grad", "inputs")
    return [name for name, reentrant in STYLES.items() if not (partial and reentrant is True)]


class CudaClock:
    """Step marks on the device's stream (CUDA events), read after a
    synchronize: device time, as the harness's runner times a CUDA step.
    Memory: the caching allocator's allocated bytes, peak reset per phase."""

    def __init__(self, device):
        self.device = device
        self.events = []

    def start(self):
        torch.cuda.synchronize(self.device)
        torch.cuda.reset_peak_memory_stats(self.device)
        self.events = []
        self.mark()
        return torch.cuda.memory_allocated(self.device)

    def mark(self):
        e = torch.cuda.Event(enable_timing=True)
        e.record()
        self.events.append(e)

    def peak(self):
        torch.cuda.synchronize(self.device)
        return torch.cuda.max_memory_allocated(self.device)

    def reset_peak(self):
        torch.cuda.reset_peak_memory_stats(self.device)

    def ms(self, a, b):
        torch.cuda.synchronize(self.device)
        return self.events[a].elapsed_time(self.events[b])


def train(case, run_name, plant=None, rules="torch", allocator=None, record=True):
    """One run: seed, then case.steps SGD steps, as harness/train/runner.c run_once,
    on case.device (cpu or cuda:N; the report's tensors are moved there).
    allocator: the counting allocator's ctypes library, to measure peaks on
    the CPU; on CUDA the caching allocator's statistics and CUDA events."""
    reentrant = {**STYLES, **STATE_STYLES, SELECTIVE_STYLE: False}[run_name]
    replay_state = run_name in STATE_STYLES and plant != "no_state_replay"
    context = {}
    if run_name == SELECTIVE_STYLE:
        context = {"context_fn": selective_context(case.attrs.get("policy", "none"))}
    preserve = case.preserve_rng_state and plant != "no_rng_preserve"
    ranges, plain_from = case.plan_segments()
    dev = torch.device(case.device)
    clock = CudaClock(dev) if dev.type == "cuda" else None
    S = {k: v.to(dev) for k, v in case.initial_buffers().items()}
    P = {n: case.params_init[n].to(dev).clone().requires_grad_(True) for n in case.param_names}
    x = case.x.to(dev).clone().requires_grad_(case.input_requires_grad)
    target = case.target.to(dev).clone()
    ac_dtype = case.autocast_dtype()
    res = RunResult(run_name)
    torch.manual_seed(case.seed)

    def segment(begin, end):
        if not replay_state:
            return lambda inp: layers_forward(case, P, begin, end, inp, rules, S)
        # Called once in forward, once in the recompute (both torch styles):
        # the forward runs on the live buffers after copying them; the
        # recompute on a copy of that copy, dropped after.
        snapshot = {}

        def replayed(inp):
            if not snapshot:
                snapshot.update({k: v.clone() for k, v in S.items()})
                return layers_forward(case, P, begin, end, inp, rules, S)
            return layers_forward(case, P, begin, end, inp, rules, {k: v.clone() for k, v in snapshot.items()})
        return replayed

    # The case's early_stop and determinism_check are torch's own switches
    # of the non-reentrant checkpoint (torch >= 2.1): set_checkpoint_early_stop
    # is read when the checkpoint's forward runs, determinism_check is passed.
    early_stop = case.attrs.get("early_stop", "true") == "true"
    if reentrant is False:
        context["determinism_check"] = "none" if case.attrs.get("determinism_check") == "none" else "default"

    def ckpt(fn, *args):
        with torch.utils.checkpoint.set_checkpoint_early_stop(early_stop):
            return checkpoint(fn, *args, use_reentrant=reentrant, preserve_rng_state=preserve, **context)

    def nested(fn):
        """nest = N: fn inside N - 1 checkpoints (the caller adds the outermost)."""
        for _ in range(case.nest - 1):
            fn = (lambda inner: lambda *a: ckpt(inner, *a))(fn)
        return fn

    def two_stream_forward():
        """Regions of three tensors and the scale, a plain number, passed
        through torch.utils.checkpoint as a non-tensor argument."""
        cur = (x, torch.zeros_like(x), torch.zeros_like(x))
        for begin, end in ranges:
            def fn(xi, ri, ci, s, begin=begin, end=end):
                return two_stream_layers(case, P, begin, end, xi, ri, ci, s)
            if reentrant is None:
                cur = fn(*cur, TWO_STREAM_SCALE)
            else:
                cur = ckpt(nested(fn), *cur, TWO_STREAM_SCALE)
        xs, rs, _ = two_stream_layers(case, P, plain_from, case.layers, *cur, TWO_STREAM_SCALE)
        return xs + rs

    for step in range(1, case.steps + 1):
        for t in list(P.values()) + [x]:
            t.grad = None
        if clock is not None:
            before = clock.start()
        elif allocator is not None:
            allocator.ckpt_counting_allocator_reset_peak()
            before = allocator_live(allocator)
        c0 = time.process_time()
        t0 = time.perf_counter()
        ctx = torch.autocast(dev.type, dtype=ac_dtype) if ac_dtype is not None else nullcontext()
        with ctx:
            if case.model == "two_stream":
                cur = two_stream_forward()
            else:
                cur = x
                for begin, end in ranges:
                    fn = segment(begin, end)
                    if reentrant is None:
                        cur = fn(cur)
                    else:
                        cur = ckpt(nested(fn), cur)
                cur = layers_forward(case, P, plain_from, case.layers, cur, rules, S)
            loss = F.mse_loss(cur, target)
        del cur
        t1 = time.perf_counter()
        if clock is not None:
            clock.mark()
            res.forward_peak_bytes.append(clock.peak() - before)
            clock.reset_peak()
        elif allocator is not None:
            # Per phase, as the harness measures: forward through the loss,
            # then backward with the peak reset (both against `before`).
            res.forward_peak_bytes.append(allocator_peak(allocator) - before)
            allocator.ckpt_counting_allocator_reset_peak()
        if loss.requires_grad:
            backward(case.attrs.get("backward", "loss"), loss,
                     [P[n] for n in case.param_names] + ([x] if x.requires_grad else []))
        else:
            # Reentrant checkpoints whose inputs need no grad give outputs
            # that need none: torch's backward() raises here ("element 0 of
            # tensors does not require grad"). The harness's tape runs an
            # empty backward instead; both end with no gradients, which is
            # what gets compared.
            res.note = ("loss does not require grad (no checkpoint input requires grad): torch's "
                        "backward() refuses, the harness runs an empty backward; compared as no gradients")
        t2 = time.perf_counter()
        res.step_cpu_ms.append((time.process_time() - c0) * 1e3)
        if clock is not None:
            clock.mark()
            res.forward_ms.append(clock.ms(0, 1))
            res.backward_ms.append(clock.ms(1, 2))
            res.backward_peak_bytes.append(clock.peak() - before)
            res.peak_bytes.append(max(res.forward_peak_bytes[-1], res.backward_peak_bytes[-1]))
        else:
            res.forward_ms.append((t1 - t0) * 1e3)
            res.backward_ms.append((t2 - t1) * 1e3)
        if clock is None and allocator is not None:
            res.backward_peak_bytes.append(allocator_peak(allocator) - before)
            res.peak_bytes.append(max(res.forward_peak_bytes[-1], res.backward_peak_bytes[-1]))
        if record:
            res.tensors[f"steps/{step}/loss"] = loss.detach().clone()
            # A parameter without a gradient is left out, as the harness does.
            for n in case.param_names:
                if P[n].grad is not None:
                    res.tensors[f"steps/{step}/grads/{n}"] = P[n].grad.clone()
            if x.grad is not None:
                res.tensors[f"steps/{step}/grads/input.x"] = x.grad.clone()
            for n, b in S.items():
                res.tensors[f"steps/{step}/buffers/{n}"] = b.clone()
        del loss
        with torch.no_grad():
            for n in case.param_names:
                p = P[n]
                if p.grad is None:
                    continue
                if plant == "sgd_mul":
                    p -= case.lr * p.grad
                else:
                    # The harness's update (runner.c): one ATen add_ with alpha.
                    p.add_(p.grad, alpha=-case.lr)
    if record:
        for n in case.param_names:
            res.tensors[f"final_params/{n}"] = P[n].detach().clone()
    # Medians over the steps, as the harness's runner records them.
    res.attrs["timing.forward_ms"] = statistics.median(res.forward_ms)
    res.attrs["timing.backward_ms"] = statistics.median(res.backward_ms)
    steps_ms = [f + b for f, b in zip(res.forward_ms, res.backward_ms)]
    res.attrs["timing.step_ms"] = statistics.median(steps_ms)
    if len(steps_ms) > 1:
        # the run's own spread: the judge marks (or, for a one-time cost
        # inside a step, withholds) an overhead whose steps disagree
        res.attrs["timing.fastest_step_ms"] = min(steps_ms)
        res.attrs["timing.slowest_step_ms"] = max(steps_ms)
    res.attrs["timing.step_cpu_ms"] = statistics.median(res.step_cpu_ms)
    res.attrs["timing.timed_steps"] = len(res.forward_ms)
    res.attrs["timing.steps"] = case.steps
    if res.peak_bytes:
        res.attrs["memory.peak_bytes"] = max(res.peak_bytes)
        res.attrs["memory.forward_peak_bytes"] = max(res.forward_peak_bytes)
        res.attrs["memory.backward_peak_bytes"] = max(res.backward_peak_bytes)
    return res


def allocator_stats(lib):
    import ctypes
    live, peak = ctypes.c_int64(), ctypes.c_int64()
    lib.ckpt_counting_allocator_stats(ctypes.byref(live), ctypes.byref(peak), None)
    return live.value, peak.value


def allocator_live(lib):
    return allocator_stats(lib)[0]


def allocator_peak(lib):
    return allocator_stats(lib)[1]
