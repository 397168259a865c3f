#!/usr/bin/env python3
"""check_jax_case.py RUN VERDICT [--reason REGEX] [--out-dir DIR]: trains
python/examples/jax_checkpoints.py's plain baseline and RUN under jax.jit on
XLA:CPU through ckpt_verify.frontends.jax.verify_jax, has the C judge give
RUN its verdict from the gradients and XLA's evidence, and checks it is
VERDICT with a reason matching REGEX. Exit 0 when both hold, 1 when not.
--keep-barriers runs XLA with its pass cse_barrier_expander disabled
(XLA_FLAGS=--xla_disable_hlo_passes=cse_barrier_expander), as
tests/xla/check_xla_case.py does.

check_jax_case.py --raising-run NAME ERROR: a run whose loss raises while
JAX traces it must get the judge's ERROR with the error in its reason.

check_jax_case.py --checkpointed-baseline RUN: the baseline is RUN (a
checkpoint): verify_jax must refuse it (CheckpointInBaseline) before
writing a report. Exit 0 when it does."""
import argparse
import os
import re
import sys
import tempfile

KEEP_BARRIERS = "--xla_disable_hlo_passes=cse_barrier_expander"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [os.path.join(ROOT, "python"), os.path.join(ROOT, "python", "examples")]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("run")
    ap.add_argument("verdict", nargs="?")
    ap.add_argument("--reason", default="")
    ap.add_argument("--out-dir", default=None)
    ap.add_argument("--checkpointed-baseline", action="store_true")
    ap.add_argument("--keep-barriers", action="store_true")
    ap.add_argument("--raising-run", action="store_true")
    args = ap.parse_args()
    if args.keep_barriers:
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + KEEP_BARRIERS).strip()
    import jax_checkpoints as ex

    from ckpt_verify import CheckpointInBaseline
    from ckpt_verify.frontends.jax import verify_jax
    out_dir = args.out_dir or tempfile.mkdtemp(prefix="ckpt_verify_jax.")
    os.makedirs(out_dir, exist_ok=True)
    tag = "_kept" if args.keep_barriers else ""
    out = os.path.join(out_dir, f"jax_{args.run}{tag}.h5")
    if args.checkpointed_baseline:
        try:
            verify_jax(ex.init_fn, ex.batch_fn, {"plain": ex.plain}, baseline=ex.RUNS[args.run], out=out)
        except CheckpointInBaseline as e:
            ok = not os.path.exists(out)
            print(f"refused: {e}; report {'not ' if ok else ''}written")
            return 0 if ok else 1
        print("not refused: a checkpointed baseline was accepted")
        return 1
    expect = {args.run: args.verdict} if args.verdict != "PASS" else None
    if args.raising_run:
        def raises(params, batch):
            raise ValueError("planted: this loss cannot be traced")
        step = raises
    else:
        step = ex.RUNS[args.run]
    report = verify_jax(ex.init_fn, ex.batch_fn, {args.run: step}, baseline=ex.plain, out=out,
                        name=f"jax_{args.run}", expect=expect)
    print(report.table.rstrip())
    got = report.verdicts[args.run]
    ok = got.verdict == args.verdict and re.search(args.reason, got.reason) is not None
    print(f"{args.run}: {got.verdict} (want {args.verdict}); reason {'matches' if ok else 'does not match'} "
          f"/{args.reason}/")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
