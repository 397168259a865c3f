#!/usr/bin/env python3
"""xla_bytes_figure.py --out DIR REPORT.h5...: bytes per XLA run, measured
and predicted, as a data file (DIR/xla_bytes.dat) and a figure
(DIR/xla_bytes.png, gnuplot, scripts/plot_xla_bytes.gp).

Measured: the run's `xla.temp_bytes`, the temp buffer of XLA's buffer
assignment for its compiled step (docs/xla.md), as recorded in the report.
Predicted: the same report's plain baseline_0 `xla.temp_bytes` less what a
per-block checkpoint of the same model saves in eager torch on the CPU:
`memory.peak_bytes` of the plain step minus that of
torch.utils.checkpoint(use_reentrant=False) around each block, both
trained here through ckpt_verify.verify(device="cpu") and counted by the
counting CPU allocator. That source shares nothing with XLA or the evidence
reader: another runtime, another meter, the activations a checkpoint is
meant to drop. The models are python/examples/xla_checkpoints.py's (the
dropout and bf16-autocast cases their own; JAX's reports, the same MLP,
take the plain case's figure).

--expect-rows N: exit 1 unless the data file holds N rows, one per run,
each with both numbers. Runs in the main environment (scripts/python)."""
import argparse
import os
import subprocess
import sys
import tempfile

import h5py

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python", "examples"))
KEEP = "cse_barrier_expander"


def eager_saving(case: str) -> int:
    """Bytes a per-block non-reentrant checkpoint saves in eager torch on
    the CPU for `case`'s model: peak of the plain step minus peak of the
    checkpointed one (verify(device="cpu"), counting allocator)."""
    import torch
    import xla_checkpoints as ex
    from torch.utils.checkpoint import checkpoint

    import ckpt_verify

    def plain(model, batch):
        return ex._loss(model, batch)

    def per_block(model, batch):
        return ex._loss(model, batch, lambda block, x: checkpoint(block, x, use_reentrant=False))

    if case == "xla_autocast":   # the XLA case's bf16 autocast, on the CPU
        def bf16(step):
            def run(model, batch):
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    return step(model, batch).float()
            return run
        plain, per_block = bf16(plain), bf16(per_block)
    model_fn = {"xla_dropout": ex.dropout_model_fn, "xla_norm_tanh": ex.norm_tanh_model_fn}.get(case, ex.model_fn)
    with tempfile.TemporaryDirectory(prefix="ckpt_verify.eager.") as tmp:
        report = ckpt_verify.verify(model_fn, ex.batch_fn, {"per_block": per_block}, baseline=plain, steps=1,
                                    noise_runs=0, device="cpu", out=os.path.join(tmp, f"{case}.h5"))
        with h5py.File(report.path, "r") as f:
            base = int(f["runs/baseline_0/memory"].attrs["peak_bytes"])
            ckpt = int(f["runs/per_block/memory"].attrs["peak_bytes"])
    return base - ckpt


def _text(v) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def rows_of(path: str) -> list:
    """(label, model case, measured temp bytes, baseline temp bytes) per judged run."""
    out = []
    with h5py.File(path, "r") as f:
        case = _text(f["case"].attrs["name"])
        flags = _text(f["case"].attrs.get("xla_flags", ""))
        model = next((c for c in ("xla_dropout", "xla_autocast", "xla_norm_tanh", "xla_cse") if case.startswith(c)),
                     "xla_cse")
        base = int(f["runs/baseline_0/xla"].attrs["temp_bytes"])
        for run, g in f["runs"].items():
            if run.startswith("baseline_") or "_rerun_" in run or "xla" not in g:
                continue
            label = f"{case}{', keep' if KEEP in flags else ''}"
            out.append((label, model, int(g["xla"].attrs["temp_bytes"]), base))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--expect-rows", type=int, default=None)
    ap.add_argument("reports", nargs="+")
    args = ap.parse_args(argv)
    rows = []
    for path in sorted(args.reports):
        try:
            rows += rows_of(path)
        except (OSError, KeyError) as e:
            print(f"xla_bytes_figure: {path}: not an XLA report with evidence ({e})", file=sys.stderr)
            return 2
    rows.sort()
    savings = {m: eager_saving(m) for m in sorted({r[1] for r in rows})}
    os.makedirs(args.out, exist_ok=True)
    dat = os.path.join(args.out, "xla_bytes.dat")
    with open(dat + ".tmp", "w") as f:
        f.write('"run" "measured (XLA temp bytes)" "predicted (baseline - eager saving)" "plain step (XLA)"\n')
        for label, model, measured, base in rows:
            f.write(f'"{label}" {measured} {base - savings[model]} {base}\n')
    os.replace(dat + ".tmp", dat)
    for model, saving in savings.items():
        print(f"eager torch CPU, {model}: a per-block checkpoint saves {saving} bytes of peak")
    with open(dat) as f:
        print(f.read().rstrip())
    png = os.path.join(args.out, "xla_bytes.png")
    script = os.path.join(ROOT, "scripts", "plot_xla_bytes.gp")
    subprocess.run(["gnuplot", "-e", f"data='{dat}'; nrow={len(rows)}; out='{png}'; term='png'", script], check=True)
    print(f"figure: {png}")
    if args.expect_rows is not None:
        with open(dat) as f:
            body = [line.rsplit(None, 3) for line in f.read().splitlines()[1:]]
        good = [r for r in body if len(r) == 4 and all(x.lstrip("-").isdigit() for x in r[1:])]
        if len(body) != args.expect_rows or len(good) != len(body):
            print(f"xla_bytes_figure: {dat} holds {len(good)} complete row(s) of {len(body)}, "
                  f"want {args.expect_rows}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
