#!/usr/bin/env python3
"""check_xla_case.py CASE RUN VERDICT [--reason REGEX] [--keep-barriers] [--noise-runs N] [--out-dir DIR]:
trains one case of python/examples/xla_checkpoints.py on XLA:CPU through
ckpt_verify.verify(device="xla") (baselines and RUN only), has the C judge
give RUN its verdict, and checks it is VERDICT and that the judge's reason
matches REGEX. --keep-barriers runs XLA with its pass cse_barrier_expander
disabled (XLA_FLAGS=--xla_disable_hlo_passes=cse_barrier_expander), so the
opt-barriers last until scheduling (docs/xla.md). --noise-runs: verify()'s
re-runs of a run that differs (default 4). --as-lambdas gives model_fn,
the baseline and the run as lambdas around the example's functions, as a
script written in one go does (the unfused twin's child process gets them
by cloudpickle). Exit 0 when both hold, 1 when not."""
import argparse
import os
import re
import sys

KEEP_BARRIERS = "--xla_disable_hlo_passes=cse_barrier_expander"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [os.path.join(ROOT, "python"), os.path.join(ROOT, "python", "examples")]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("case")
    ap.add_argument("run")
    ap.add_argument("verdict")
    ap.add_argument("--reason", default="")
    ap.add_argument("--out-dir", default=None)
    ap.add_argument("--keep-barriers", action="store_true")
    ap.add_argument("--noise-runs", type=int, default=4)
    ap.add_argument("--as-lambdas", action="store_true")
    args = ap.parse_args()
    if args.keep_barriers:
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + KEEP_BARRIERS).strip()
    import tempfile

    import xla_checkpoints as ex

    import ckpt_verify
    model_fn, baseline, runs, _ = ex.CASES[args.case]
    run = runs[args.run]
    if args.as_lambdas:
        model_fn, baseline = (lambda make: lambda: make())(model_fn), (lambda fn: lambda m, b: fn(m, b))(baseline)
        if isinstance(run, ckpt_verify.Run):
            run = ckpt_verify.Run(prepare=run.prepare and (lambda fn: lambda m: fn(m))(run.prepare),
                                  step=run.step and (lambda fn: lambda m, b: fn(m, b))(run.step))
        else:
            run = (lambda fn: lambda m, b: fn(m, b))(run)
    out_dir = args.out_dir or tempfile.mkdtemp(prefix="ckpt_verify_xla.")
    os.makedirs(out_dir, exist_ok=True)
    out = os.path.join(out_dir, f"{args.case}_{args.run}.h5")
    expect = {args.run: args.verdict} if args.verdict not in ("PASS", "NOISE") else None
    report = ckpt_verify.verify(model_fn, ex.batch_fn, {args.run: run}, baseline=baseline,
                                device="xla", out=out, name=f"{args.case}_{args.run}", expect=expect,
                                noise_runs=args.noise_runs)
    print(report.table.rstrip())
    print(report)
    got = report.verdicts[args.run]
    ok = got.verdict == args.verdict and re.search(args.reason, got.reason) is not None
    print(f"{args.run}: {got.verdict} (want {args.verdict}); reason {'matches' if ok else 'does not match'} "
          f"/{args.reason}/")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
