#!/usr/bin/env python3
"""GPU side-by-side benchmark: the same model, parameters and inputs trained
by ckpt-verify and by PyTorch (torch.utils.checkpoint, torch 2.x with CUDA)
on one GPU, and the ratios ours / torch of step time and peak bytes.

    bench_vs_torch_gpu.py --bench-dir DIR [--device cuda:0] [--case NAME ...]
                          [--steps N] [--ckpt-verify PATH] [--out DIR] [--report-only]

Ours: the records of `ckpt-verify bench --device cuda:N --out DIR` (its
summary.json): per case the fastest baseline's and each impl's median step
time over the timed steps (CUDA events on the device's stream, after the
unrecorded warm-up run that takes the cuBLAS workspace) and peak bytes (the
caching allocator's allocated bytes above the step's start, peak reset per
phase; gradients are dropped when a step begins, so they are counted as they
appear in backward).

Theirs: the case's parameters and inputs come from a report the harness
writes for it here (`ckpt-verify --case NAME --device D --impl reentrant
--steps 1`), and torch_crosscheck.py's rebuild of the model trains them on
the same device, after an untimed warm-up run, for N steps per style (none,
reentrant, non-reentrant), measured the same way (CudaClock there: CUDA
events around forward and backward, torch.cuda allocated bytes above the
step's start with the peak reset per phase, gradients set to None when a
step begins). torch's own F.dropout is used (its CUDA kernel), as a user's
model would.

Targets (issue 19): ours / torch <= 1.00 for step time and for peak bytes,
per case and style; a missed one exits 1 (--report-only: 0). Missing
figures, a harness failure or no CUDA device: exit 2.

Imports torch_crosscheck (the one torch rebuild of the harness's models),
nothing from bench_vs_torch.py, whose CPU statistics are its own.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# (label, the impl's record in the bench summary or None for the baseline, torch run)
STYLES = (("none", None, "torch_none"), ("reentrant", "reentrant", "torch_reentrant"),
          ("nonreentrant", "nonreentrant", "torch_nonreentrant"))
DEFAULT_CASES = ("gpu_gpt_bf16_bs8_segevery", "gpu_gpt_f32_bs4_segevery", "gpu_mlp_bfloat16_w4096")
TARGET = 1.00


def ours_from_summary(path, case_name):
    """{label: (step ms, peak bytes)} of one case from a bench summary.json."""
    with open(path) as f:
        records = [r for r in json.load(f).get("records", []) if r.get("case") == case_name]
    if not records:
        return None
    out = {"none": (records[0].get("baseline_step_ms"), records[0].get("baseline_peak_bytes"))}
    for r in records:
        out[r.get("impl")] = (r.get("step_ms"), r.get("peak_bytes"))
    return out


def numbers_ok(*values):
    return all(isinstance(v, (int, float)) and v > 0 for v in values)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bench-dir", required=True,
                    help="output directory of `ckpt-verify bench --device cuda:N` (its summary.json)")
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--case", action="append", default=None,
                    help=f"case to compare (repeatable; default: {', '.join(DEFAULT_CASES)})")
    ap.add_argument("--cases", default=os.path.join(ROOT, "cases", "bench", "gpu.ini"), help="case file")
    ap.add_argument("--steps", type=int, default=5, help="torch steps per style, median taken (default 5)")
    ap.add_argument("--ckpt-verify", default=os.path.join(ROOT, "build", "ckpt-verify"))
    ap.add_argument("--out", default=None, help="directory for the parameter reports (default: temporary)")
    ap.add_argument("--report-only", action="store_true", help="print missed targets, exit 0")
    args = ap.parse_args(argv)
    cases = args.case or list(DEFAULT_CASES)
    summary = os.path.join(args.bench_dir, "summary.json")
    if not os.path.exists(summary):
        print(f"bench_vs_torch_gpu: no {summary} (run ckpt-verify bench --device {args.device} --out DIR first)",
              file=sys.stderr)
        return 2

    import h5py
    import torch
    if not torch.cuda.is_available():
        print(f"bench_vs_torch_gpu: torch {torch.__version__} sees no CUDA device", file=sys.stderr)
        return 2
    sys.path.insert(0, os.path.join(HERE, "..", "python"))
    from ckpt_verify.frontends import harness_twin as tc

    tmp = None
    out = args.out
    if not out:
        tmp = tempfile.TemporaryDirectory(prefix="bench_vs_torch_gpu.")
        out = tmp.name
    rows, problems, missed = [], [], []
    for name in cases:
        ours = ours_from_summary(summary, name)
        if ours is None:
            problems.append(f"{name}: not in {summary}")
            continue
        cmd = [args.ckpt_verify, "--cases", args.cases, "--case", name, "--device", args.device,
               "--impl", "reentrant", "--steps", "1", "--out", os.path.join(out, name)]
        print("harness: " + " ".join(cmd), flush=True)
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        print(p.stdout.rstrip())
        report = os.path.join(out, name, f"{name}.h5")
        if p.returncode != 0 or not os.path.exists(report):
            problems.append(f"{name}: ckpt-verify exited {p.returncode} (no parameter report)")
            continue
        with h5py.File(report, "r") as f:
            case = tc.Case(f)
        os.remove(report)  # parameters and gradients of a real-scale model: gigabytes
        case.device = args.device
        case.steps = args.steps
        tc.train(case, "torch_none", record=False)  # warm-up: cuBLAS workspace, kernels
        for label, impl, torch_run in STYLES:
            r = tc.train(case, torch_run, record=False)
            theirs = (r.attrs["timing.step_ms"], float(max(r.peak_bytes)))
            mine = ours.get(label if impl is None else impl, (None, None))
            if not numbers_ok(*mine, *theirs):
                problems.append(f"{name} {label}: a figure is missing or not positive (ours {mine}, torch {theirs})")
                continue
            rows.append((name, label, mine, theirs))
            for what, a, b in (("step time", mine[0], theirs[0]), ("peak bytes", mine[1], theirs[1])):
                if a / b > TARGET:
                    missed.append(f"{name} {label}: {what} ours/torch = {a / b:.3f} > {TARGET:.2f}")
        torch.cuda.empty_cache()
    if tmp:
        tmp.cleanup()

    print(f"\nours / torch on {args.device} ({torch.cuda.get_device_name(torch.device(args.device))}), torch "
          f"{torch.__version__}: median step time (CUDA events) and peak bytes (caching allocator, above the "
          f"step's start); ours from {summary}, torch median of {args.steps} steps")
    print(f"  {'case':<30} {'run':<13} {'ours ms':>9} {'torch ms':>9} {'ratio':>6}   {'ours MiB':>9} "
          f"{'torch MiB':>9} {'ratio':>6}")
    for name, label, (ot, om), (tt, tm) in rows:
        print(f"  {name:<30} {label:<13} {ot:9.2f} {tt:9.2f} {ot / tt:6.3f}   {om / 2**20:9.1f} "
              f"{tm / 2**20:9.1f} {om / tm:6.3f}")
    print(f"target: ours / torch <= {TARGET:.2f} for step time and peak bytes -> "
          + ("met" if rows and not missed and not problems else "MISSED" if missed else "not measured"))
    for m in missed:
        print(f"  MISSED: {m}")
    for problem in problems:
        print(f"bench_vs_torch_gpu: {problem}", file=sys.stderr)
    if problems:
        return 2
    return 1 if missed and not args.report_only else 0


if __name__ == "__main__":
    sys.exit(main())
