"""Every byte a user's checkpoint holds is accounted for, on every recorded
step (docs/memory.md, "A user's checkpoint"): the statement is drawn from
the baseline and the declared policy alone, anything else the forward made
and kept is an extra named by module, op and holder, a checkpoint that
saves nothing is MEMFAIL whatever it re-runs, state the model owns is the
leak check's, and what a step holds over to the next is named. Each broken
checkpoint here is MEMFAIL naming the tensor; each correct one PASSes."""
import collections
import functools
import math
import os
import sys

import h5py
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
# The model and helpers the user-memory specifications already define.
from test_user_memory import Stack, function_region, verdict  # noqa: E402

import ckpt_verify  # noqa: E402
from ckpt_verify import Run  # noqa: E402
from ckpt_verify.frontends import memory_map  # noqa: E402
from ckpt_verify.schema import attr_text  # noqa: E402

WIDTH, BATCH, BLOCKS = 64, 8, 4
TOKENS = {1: 16, 2: 64, 3: 32}  # batch 1 short, one long step, then the 32-token path


def batch_fn(step):
    return torch.randn(BATCH, TOKENS[step], WIDTH), torch.randn(BATCH, TOKENS[step], WIDTH)


def stepper(region, input_grad=False):
    def step(model, batch):
        x, y = batch
        if input_grad:
            x = x.detach().requires_grad_()
        for block in model.blocks:
            x = region(block, x)
        return F.mse_loss(x, y)
    return step


plain = stepper(lambda block, x: block(x))
nonreentrant = stepper(lambda b, x: checkpoint(b, x, use_reentrant=False))


def _recompute(block, x):
    with torch.enable_grad():
        xd = x.detach().requires_grad_()
        return xd, block(xd)


class Correct(torch.autograd.Function):
    """Forward without grad, the input and the RNG state kept, recompute in backward."""

    @staticmethod
    def forward(ctx, x, block):
        ctx.block, ctx.rng = block, torch.get_rng_state()
        ctx.save_for_backward(x)
        with torch.no_grad():
            return block(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        with torch.random.fork_rng(devices=[]):
            torch.set_rng_state(ctx.rng)
            xd, y = _recompute(ctx.block, x)
        torch.autograd.backward(y, g)
        return xd.grad, None


class KeepsRecomputedClone(Correct):
    """Correct, but a clone of the recomputed output stays on the block until the next step's backward."""

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        with torch.random.fork_rng(devices=[]):
            torch.set_rng_state(ctx.rng)
            xd, y = _recompute(ctx.block, x)
        ctx.block.last_recomputed = y.detach().clone()  # the bug
        torch.autograd.backward(y, g)
        return xd.grad, None


class ForgetsAt32(Correct):
    """Correct, except that its 32-token path runs forward with grad and keeps the graph."""

    @staticmethod
    def forward(ctx, x, block):
        if x.shape[1] != 32:
            return Correct.forward(ctx, x, block)
        ctx.block, ctx.rng = block, torch.get_rng_state()
        ctx.save_for_backward(x)
        ctx.graph = _recompute(block, x)  # the bug: grad on, graph kept
        return ctx.graph[1].detach()


def hook_checkpoint(keep_clones):
    """A saved-tensor-hook checkpoint as torch's non-reentrant one works:
    pack keeps an index, the first unpack recomputes the region under the
    forward's RNG state; keep_clones: the bug, a clone of every saved
    tensor kept as well."""
    def region(block, x):
        rng, kept, saved, count = torch.get_rng_state(), [], {}, [0]

        def pack(t):
            if keep_clones:
                kept.append(t.detach().clone())
            count[0] += 1
            return count[0] - 1

        def unpack(i):
            if not saved:
                recorded = []

                def pack_again(t):
                    recorded.append(t.detach())
                    return len(recorded) - 1
                with torch.random.fork_rng(devices=[]):
                    torch.set_rng_state(rng)
                    hooks = torch.autograd.graph.saved_tensors_hooks(pack_again, recorded.__getitem__)
                    with torch.enable_grad(), hooks:
                        block(x.detach().requires_grad_(x.requires_grad))
                saved.update(enumerate(recorded))
            return saved[i]
        with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
            return block(x)
    return region


def keep_fc1_clone(model):
    for block in model.blocks:
        block.fc1.register_forward_hook(lambda mod, args, out: setattr(mod, "kept", out.detach().clone()))


def _is_view(op):
    return any(r.alias_info is not None for r in op._schema.returns)


def save_every_op_policy():
    from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

    def policy(ctx, op, *args, **kwargs):
        return CheckpointPolicy.PREFER_RECOMPUTE if _is_view(op) else CheckpointPolicy.MUST_SAVE
    return functools.partial(create_selective_checkpoint_contexts, policy, allow_cache_entry_mutation=True)


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    runs = {
        "hook_checkpoint": stepper(hook_checkpoint(False)),
        "hook_checkpoint_keeps_clones": stepper(hook_checkpoint(True)),
        "side_clone": Run(prepare=keep_fc1_clone, step=nonreentrant),
        "keeps_recomputed_clone": stepper(function_region(KeepsRecomputedClone), input_grad=True),
        "forgets_at_32": stepper(function_region(ForgetsAt32), input_grad=True),
        "long_only": stepper(lambda b, x: checkpoint(b, x, use_reentrant=False) if x.shape[1] >= 64 else b(x)),
        "save_every_op": stepper(lambda b, x: checkpoint(b, x, use_reentrant=False,
                                                         context_fn=save_every_op_policy())),
    }
    expect = {"hook_checkpoint_keeps_clones": "MEMFAIL", "side_clone": "MEMFAIL",
              "keeps_recomputed_clone": "MEMFAIL", "forgets_at_32": "MEMFAIL", "save_every_op": "MEMFAIL"}
    out = tmp_path_factory.mktemp("accounting") / "mlp.h5"
    return ckpt_verify.verify(Stack, batch_fn, runs, baseline=plain, steps=3, out=str(out), expect=expect,
                              noise_runs=0)


def test_a_saved_tensor_hook_checkpoint_passes(mlp):
    assert verdict(mlp, "hook_checkpoint")[0] == "PASS", verdict(mlp, "hook_checkpoint")


def test_a_hook_checkpoint_keeping_a_clone_of_every_saved_tensor_is_memfail_naming_the_clones(mlp):
    v, why = verdict(mlp, "hook_checkpoint_keeps_clones")
    assert v == "MEMFAIL"
    # Its clones outweigh what it drops: it saves nothing, and they are named as its extras.
    assert "saves nothing" in why and "extras: 44 tensor(s)" in why and "aten.clone#" in why


def test_a_forward_hook_side_clone_is_memfail_naming_it_and_its_holder(mlp):
    v, why = verdict(mlp, "side_clone")
    assert v == "MEMFAIL"
    assert "aten.clone#" in why and "held by blocks.0.fc1.kept" in why


def test_a_clone_of_the_recomputed_output_kept_after_backward_is_memfail_naming_it(mlp):
    v, why = verdict(mlp, "keeps_recomputed_clone")
    assert v == "MEMFAIL"
    assert "after backward" in why and "aten.clone#" in why and "last_recomputed" in why


def test_a_step_that_forgets_to_checkpoint_is_memfail_on_that_step(mlp):
    v, why = verdict(mlp, "forgets_at_32")
    assert v == "MEMFAIL"
    assert "step 3" in why and "blocks.0.fc1 aten.addmm#0" in why


def test_a_checkpoint_of_long_sequences_only_passes_though_batch_1_is_short(mlp):
    assert verdict(mlp, "long_only")[0] == "PASS", verdict(mlp, "long_only")


def test_a_policy_that_saves_every_op_is_memfail_saves_nothing(mlp):
    v, why = verdict(mlp, "save_every_op")
    assert v == "MEMFAIL"
    assert "saves nothing" in why and "declares saved" in why


def test_every_recorded_step_is_mapped_and_the_worst_is_the_judged_one(mlp):
    with h5py.File(mlp.path, "r") as f:
        m = f["runs/forgets_at_32/memory"].attrs
        assert m["steps_judged"] == 3 and m["judged_step"] == 3
        assert m["judged_held_bytes"] > m["stated_end_forward_bytes"] + m["floor_bytes"]
        ok = f["runs/hook_checkpoint/memory"].attrs
        assert ok["steps_judged"] == 3 and ok["extra_bytes"] == 0


# -- state the model owns, and a small model ------------------------------------------------------------


def small():
    return Stack(width=32, blocks=2)


def small_batch(step):
    return torch.randn(2, 16, 32), torch.randn(2, 16, 32)


def with_staging_buffer(model, batch):
    """Correct, with a 64 KiB staging buffer made at first use and reused (more than the model's activations)."""
    if not hasattr(model, "staging"):
        model.staging = torch.empty(16384)
    return stepper(function_region(Correct), input_grad=True)(model, batch)


class StashHistory(Correct):
    """Correct, keeping each block's last two RNG states in a deque (bounded: fills over two steps)."""

    @staticmethod
    def forward(ctx, x, block):
        if not hasattr(block, "rng_history"):
            block.rng_history = collections.deque(maxlen=2)
        block.rng_history.append(torch.get_rng_state())
        return Correct.forward(ctx, x, block)


class StashLeak(Correct):
    """Correct in memory per step, but every RNG state ever drawn is kept: a leak."""

    @staticmethod
    def forward(ctx, x, block):
        if not hasattr(block, "rng_all"):
            block.rng_all = []
        block.rng_all.append(torch.get_rng_state())
        return Correct.forward(ctx, x, block)


@pytest.fixture(scope="module")
def state(tmp_path_factory):
    runs = {"staging_buffer": with_staging_buffer,
            "bounded_history": stepper(function_region(StashHistory), input_grad=True),
            "leaks_history": stepper(function_region(StashLeak), input_grad=True)}
    out = tmp_path_factory.mktemp("accounting") / "state.h5"
    return ckpt_verify.verify(small, small_batch, runs, baseline=plain, steps=5, out=str(out), noise_runs=0,
                              expect={"leaks_history": "FAIL|MEMFAIL"})


def test_a_reused_staging_buffer_on_a_small_model_is_state_not_an_extra(state):
    v, why = verdict(state, "staging_buffer")
    assert v == "PASS", why
    with h5py.File(state.path, "r") as f:
        m = f["runs/staging_buffer/memory"].attrs
        assert m["extra_bytes"] == 0 and m["state_bytes"] >= 65536
        assert "staging" in attr_text(f["runs/staging_buffer"].attrs["memory_state"])


def test_bounded_state_that_fills_over_two_steps_then_holds_still_is_no_leak(state):
    assert verdict(state, "bounded_history")[0] == "PASS", verdict(state, "bounded_history")


def test_state_that_keeps_growing_to_the_last_step_is_a_leak(state):
    v, why = verdict(state, "leaks_history")
    assert v != "PASS" and "leak" in why


# -- attention: a model's own last activation, probabilities kept "for logging" ---------------------------

HEADS, A_TOKENS = 2, 16


class Attention(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.keep_probs = False

    def forward(self, x):
        b, t, w = x.shape
        q, k, v = (z.reshape(b, t, HEADS, w // HEADS).transpose(1, 2) for z in self.qkv(x).chunk(3, -1))
        probs = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(w // HEADS), -1)
        if self.keep_probs:
            self.last_probs = probs  # "for logging"
        return self.proj((probs @ v).transpose(1, 2).reshape(b, t, w))


class AttnBlock(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.ln1, self.attn, self.ln2 = nn.LayerNorm(width), Attention(width), nn.LayerNorm(width)
        self.fc1, self.fc2 = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        h = self.fc1(self.ln2(x))
        self.last_act = h.detach()  # the model's own: the baseline keeps it too
        return x + self.fc2(F.gelu(h))


class AttnStack(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(AttnBlock(WIDTH) for _ in range(2))


def attn_batch(step):
    return torch.randn(BATCH, A_TOKENS, WIDTH), torch.randn(BATCH, A_TOKENS, WIDTH)


def log_probs(model):
    for block in model.blocks:
        block.attn.keep_probs = True


@pytest.fixture(scope="module")
def attention(tmp_path_factory):
    runs = {"nonreentrant": nonreentrant, "keeps_probs": Run(prepare=log_probs, step=nonreentrant)}
    out = tmp_path_factory.mktemp("accounting") / "attention.h5"
    return ckpt_verify.verify(AttnStack, attn_batch, runs, baseline=plain, steps=3, out=str(out), noise_runs=0,
                              expect={"keeps_probs": "MEMFAIL"})


def test_a_last_activation_the_model_itself_keeps_is_not_the_checkpoints(attention):
    assert verdict(attention, "nonreentrant")[0] == "PASS", verdict(attention, "nonreentrant")


def test_attention_probabilities_kept_at_16_tokens_are_memfail_naming_them(attention):
    v, why = verdict(attention, "keeps_probs")
    assert v == "MEMFAIL"
    assert "aten._softmax#0" in why and "blocks.0.attn.last_probs" in why


def test_the_floor_is_absolute_not_a_fraction_of_the_baseline(attention):
    with h5py.File(attention.path, "r") as f:
        base = f["runs/baseline_0/memory"].attrs["end_forward_bytes"]
        m = f["runs/keeps_probs/memory"].attrs
        kept = m["judged_held_bytes"] - m["stated_end_forward_bytes"]
        assert kept < 0.05 * base  # the old 5%-of-baseline margin would have passed it
        assert m["floor_bytes"] == memory_map.FLOOR_BYTES < kept


# -- where people look ---------------------------------------------------------------------------------


def _summary_record(report, run):
    import json
    with open(os.path.join(report.judge_dir, "summary.json")) as f:
        return next(r for r in json.load(f)["records"] if r["impl"] == run)


def test_the_table_shows_held_and_stated_side_by_side_and_the_recomputed_ops(mlp):
    line = next(line for line in mlp.table.splitlines()
                if "vs stated" in line and "recomputed ops" in line and "(step 3," in line)
    assert "held at end of forward" in line  # forgets_at_32: judged on its step 3


def test_summary_junit_and_html_carry_the_statement_the_recomputed_ops_and_the_extras(mlp):
    rec = _summary_record(mlp, "side_clone")
    assert rec["memory"] == "judged" and rec["memory_step"] == 1 and rec["recomputed_ops"] > 0
    assert rec["judged_held_bytes"] - rec["stated_end_forward_bytes"] == 524288
    assert rec["memory_statement"].startswith("step 1: the baseline holds ")
    assert len(rec["memory_extras"]) == 4 and all("aten.clone#0" in e for e in rec["memory_extras"])
    assert _summary_record(mlp, "forgets_at_32")["memory_state"]  # its ctx's RNG stashes, by owner
    with open(os.path.join(mlp.judge_dir, "junit.xml")) as f:
        junit = f.read()
    assert "aten.clone#0 (131072 B, held by blocks.0.fc1.kept)" in junit and "name=\"memory_extras\"" in junit
    assert 'name="recomputed_ops"' in junit and 'name="stated_end_forward_bytes"' in junit
    with open(os.path.join(mlp.judge_dir, "report.html")) as f:
        html = f.read()
    assert "<dt>recomputed ops</dt>" in html and "<dt>extras</dt>" in html and "<dt>statement</dt>" in html


def test_judge_compare_to_flags_a_run_holding_more_above_its_statement(mlp, tmp_path):
    import shutil
    import subprocess

    from ckpt_verify import judge as judge_mod
    judge = judge_mod.find_judge(None)
    prev = tmp_path / "prev"
    shutil.copytree(mlp.judge_dir, prev)
    with h5py.File(mlp.path, "r") as f, h5py.File(tmp_path / "now.h5", "w") as g:
        for key in f:
            f.copy(key, g)
        for key, value in f.attrs.items():
            g.attrs[key] = value
        # The same runs, but hook_checkpoint now holds 64 KiB above its statement.
        g["runs/hook_checkpoint/memory"].attrs["judged_held_bytes"] += 65536
    out = subprocess.run([judge, "judge", "--out", str(tmp_path / "now"), "--compare-to", str(prev),
                          str(tmp_path / "now.h5")], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert out.returncode == 1, out.stdout
    assert "REGRESSION  mlp/hook_checkpoint: verdict PASS -> MEMFAIL" in out.stdout
    assert "held above its memory statement +0 B -> +65536 B" in out.stdout


# -- never silently unjudged ----------------------------------------------------------------------------


def _no_meter(monkeypatch):
    """verify() finds no way to measure memory (a torch no meter can be built for)."""
    from ckpt_verify.memory import NoMeter
    monkeypatch.setattr(sys.modules["ckpt_verify.verify"], "meter_for",
                        lambda device, judge_path=None: NoMeter("CPU memory cannot be measured: no meter (test)"))


def test_a_run_whose_memory_cannot_be_measured_says_so_in_its_verdict_line_and_summary(tmp_path, monkeypatch):
    _no_meter(monkeypatch)
    report = ckpt_verify.verify(small, small_batch, {"mine": nonreentrant}, baseline=plain, steps=1,
                                out=str(tmp_path / "r.h5"), noise_runs=0)
    v = report.verdicts["mine"]
    assert v.verdict == "PASS"
    assert "; memory not judged: CPU memory cannot be measured: no meter (test)" in v.reason  # not in brackets
    assert _summary_record(report, "mine")["memory"] == "not judged: CPU memory cannot be measured: no meter (test)"


def test_require_memory_makes_a_run_whose_memory_cannot_be_judged_error(tmp_path, monkeypatch):
    _no_meter(monkeypatch)
    report = ckpt_verify.verify(small, small_batch, {"mine": nonreentrant}, baseline=plain, steps=1,
                                out=str(tmp_path / "r.h5"), noise_runs=0, require_memory=True)
    v = report.verdicts["mine"]
    assert v.verdict == "ERROR"
    assert "memory not judged: CPU memory cannot be measured" in v.reason and "require_memory=True" in v.reason


def test_require_memory_is_true_or_false(tmp_path):
    with pytest.raises(ckpt_verify.BadInput, match="require_memory must be True or False"):
        ckpt_verify.verify(small, small_batch, {"mine": nonreentrant}, require_memory="yes")
