#!/usr/bin/env python3
"""check_example.py EXAMPLE [--device D] [--out-dir DIR]: runs one of
python/examples/ through ckpt_verify.verify() and checks every verdict
against the one it must get (EXPECTED below). Exit 0 when all match, 1
when one does not, 77 (CTest's skip) for --device cuda without CUDA."""
import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [os.path.join(ROOT, "python"), os.path.join(ROOT, "python", "examples")]

# What each example must give; a run missing here must not be judged at all.
# On the CPU every kernel is deterministic and PASS means bitwise; on CUDA
# some backward kernels (attention, index_add) are not, and a run that must
# pass may be NOISE there: within the baselines' own spread.
EXPECTED = {
    "transformer_torch_checkpoint": {"torch_reentrant": "PASS", "torch_nonreentrant": "PASS",
                                     "torch_sequential": "PASS", "torch_selective": "PASS"},
    "planted_no_rng_stash": {"py_reentrant": "PASS", "py_reentrant_no_rng_stash": "FAIL",
                             "py_reentrant_backward_in_halves": "FAIL", "py_reentrant_keeps_recompute": "FAIL"},
    "hook_checkpoint": {"hook_checkpoint": "PASS", "hook_checkpoint_counter_reset": "FAIL"},
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("example", choices=sorted(EXPECTED))
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--out-dir", default=None)
    args = ap.parse_args()
    import importlib
    import tempfile

    import torch

    import ckpt_verify
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print(f"{args.example}: no CUDA device here; skipped")
        return 77
    ex = importlib.import_module(args.example)
    out_dir = args.out_dir or tempfile.mkdtemp(prefix="ckpt_verify_example.")
    os.makedirs(out_dir, exist_ok=True)
    out = os.path.join(out_dir, f"{args.example}_{args.device.replace(':', '')}.h5")
    report = ckpt_verify.verify(ex.model_fn, ex.batch_fn, ex.runs, baseline=ex.baseline,
                                expect=getattr(ex, "expect", None), device=args.device, out=out,
                                name=args.example, steps=getattr(ex, "steps", 2))
    print(report.table.rstrip())
    print(report)
    want = EXPECTED[args.example]
    got = {run: v.verdict for run, v in report.verdicts.items()}
    problems = []
    for run, verdict in want.items():
        if run in report.skipped:
            # The pinned torch has every adapter: a skipped run is a fault.
            problems.append(f"{run}: skipped ({report.skipped[run]}), must be {verdict}")
            continue
        allowed = {verdict, "NOISE"} if verdict == "PASS" and args.device != "cpu" else {verdict}
        if got.get(run) not in allowed:
            problems.append(f"{run}: {got.get(run, 'not judged')}, must be {verdict}")
    problems += [f"{run}: judged {v} but not expected at all" for run, v in got.items() if run not in want]
    if not report.ok:
        problems.append("the judge calls a verdict unexpected: " + ", ".join(v.run for v in report.unexpected()))
    if report.memory_source is None or "not recorded" in report.memory_source:
        problems.append(f"memory not measured: {report.memory_source}")
    for p in problems:
        print(f"check_example: {args.example}: {p}", file=sys.stderr)
    print(f"check_example: {args.example} on {args.device}: "
          + ("all verdicts as they must be" if not problems else "WRONG"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
