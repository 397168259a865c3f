"""docs/compile.md's table: bytes saved for backward, eager and compiled
(aot_eager), plain and non-reentrant checkpoint, and the planted
partitioner that ignores checkpoint tags, on compile_cases.py's model.

Two measures, taken independently: what `saved_tensors_hooks` sees packed
during one forward (the tensors autograd actually keeps: an outer hook sees
what the compiled region's autograd.Function saves and, in eager, what the
checkpoint does not take over with its own hooks) and, for compiled runs,
what compile_evidence read off the partitioned graphs. Prints a Markdown
table; exits 1 when a compiled run's two measures disagree. With
--inductor, Inductor's plain and checkpointed rows too (minutes of C++
compilation on a CPU machine: not in the `compile` label)."""
import sys

import compile_cases as cc
import torch
from torch.autograd.graph import saved_tensors_hooks

from ckpt_verify import compile_evidence


def hooked_bytes(model, batch):
    seen = {"n": 0, "bytes": 0}

    def pack(t):
        seen["n"] += 1
        seen["bytes"] += t.numel() * t.element_size()
        return t
    with saved_tensors_hooks(pack, lambda t: t):
        loss = model(*batch)
    loss.backward()
    return seen


def main():
    rows, bad = [], []
    inductor = compile_evidence.backend("inductor")

    def by_inductor(model):
        return torch.compile(model, backend=inductor)
    configs = [
        ("eager", "plain", lambda m: m),
        ("eager", "non-reentrant checkpoint", cc.checkpointed),
        ("aot_eager", "plain", cc.compiled()),
        ("aot_eager", "non-reentrant checkpoint", cc.then(cc.checkpointed, cc.compiled())),
        ("aot_eager", "planted: partitioner ignores tags",
         cc.then(cc.checkpointed, cc.compiled(compile_evidence.ignoring_checkpoint_tags()))),
    ]
    if "--inductor" in sys.argv[1:]:
        configs += [("inductor", "plain", by_inductor),
                    ("inductor", "non-reentrant checkpoint", cc.then(cc.checkpointed, by_inductor))]
    for how, what, prepare in configs:
        torch.manual_seed(0)
        model = prepare(cc.Net(0.0))
        batch = (torch.randn(cc.BATCH, cc.SEQ, cc.HIDDEN), torch.randn(cc.BATCH, cc.SEQ, cc.HIDDEN))
        hooked_bytes(model, batch)  # compiles (first call); measured on the second
        with compile_evidence.collect() as col:
            seen = hooked_bytes(model, batch)
        ev = col.attrs()
        if ev and (ev["compile.saved_tensors"], ev["compile.saved_bytes"]) != (seen["n"], seen["bytes"]):
            bad.append(f"{how} {what}: hooks saw {seen['n']} / {seen['bytes']} B, the graphs say "
                       f"{ev['compile.saved_tensors']} / {ev['compile.saved_bytes']} B")

        def cell(key, ev=ev):
            return str(ev[key]) if ev else "-"
        rows.append(f"| {how} | {what} | {seen['n']} | {seen['bytes']} | {cell('compile.saved_tensors')} | "
                    f"{cell('compile.saved_bytes')} | {cell('compile.saved_activation_bytes')} | "
                    f"{cell('compile.ckpt_regions_recomputed')} of {cell('compile.ckpt_regions')} | "
                    f"{cell('compile.recompute_ops')} | {cell('compile.recompute_ops_untagged')} |")
    print("| compiled by | step | hooks: tensors | hooks: bytes | graphs: saved tensors | graphs: saved bytes | "
          "graphs: activation bytes | regions recomputed | recompute ops (tagged) | recompute ops (untagged) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    print("\n".join(rows))
    for line in bad:
        print(f"DISAGREE {line}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
