"""python -m ckpt_verify [--device D] [--out FILE.h5] [...] SCRIPT.py [ARGS...]

Runs verify() on what SCRIPT.py defines at module level: model_fn,
batch_fn and runs (required); baseline, expect, steps, seed, lr,
tolerance, min_memory_saving, min_held_cut, noise_runs, name, model_definition, and for
distributed runs world_size, parallel, backend, parallel_options, timeout,
against_single (docs/distributed.md) (optional; command-line options win). Options go before SCRIPT.py, as
for `python -m pdb`: everything after it is the script's own arguments
(its sys.argv[1:]). The script's directory is put on sys.path first, so it
can import its neighbours.

Exit status: 0 every verdict as expected, 1 an unexpected verdict (a run
that raised is judged ERROR), 2 bad input or a baseline that raised
(nothing written), 3 the judge failed."""
import argparse
import os
import runpy
import shutil
import sys
import tempfile

REQUIRED = ("model_fn", "batch_fn", "runs")
OPTIONAL = ("baseline", "expect", "steps", "seed", "lr", "tolerance", "min_memory_saving", "min_held_cut",
            "noise_runs", "name", "model_definition", "world_size", "parallel", "backend", "parallel_options",
            "timeout", "against_single")


def _load(script, script_args):
    if not os.path.isfile(script):
        raise FileNotFoundError(f"{script}: no such file")
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    saved, sys.argv = sys.argv, [script, *script_args]
    try:
        return runpy.run_path(script, run_name="__ckpt_verify__")
    finally:
        sys.argv = saved


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m ckpt_verify", description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu", help="cpu (default), cuda or cuda:N")
    ap.add_argument("--out", help="report file (default: a new temporary directory)")
    ap.add_argument("--steps", type=int, help="training steps per run")
    ap.add_argument("--seed", type=int, help="the seed of every run")
    ap.add_argument("--world-size", dest="world_size", type=int,
                    help="train every run on N torch.distributed ranks (docs/distributed.md)")
    ap.add_argument("--parallel", choices=("ddp", "fsdp", "fsdp2"), help="with --world-size: the wrapper")
    ap.add_argument("--judge", help="the ckpt-verify binary (default: $CKPT_VERIFY, PATH, the tree's build/)")
    ap.add_argument("script", help="a Python file defining model_fn, batch_fn and runs")
    ap.add_argument("script_args", nargs=argparse.REMAINDER, metavar="ARGS",
                    help="the script's own arguments (its sys.argv[1:]); options of this command go before SCRIPT")
    args = ap.parse_args(argv)

    from . import errors, verify  # after argparse: --help needs no torch

    try:
        defs = _load(args.script, args.script_args)
    except SystemExit as e:  # the script's own argument parser refused (or --help)
        return e.code if isinstance(e.code, int) else 2
    except Exception as e:  # the user's script failed to load: bad input
        print(f"{args.script}: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    missing = [n for n in REQUIRED if n not in defs]
    if missing:
        print(f"{args.script}: defines no {', '.join(missing)} (needs model_fn, batch_fn and runs)", file=sys.stderr)
        return 2
    kwargs = {n: defs[n] for n in OPTIONAL if n in defs}
    kwargs.setdefault("name", os.path.splitext(os.path.basename(args.script))[0])
    for key in ("steps", "seed", "judge", "world_size", "parallel"):
        if getattr(args, key) is not None:
            kwargs[key] = getattr(args, key)
    # The CLI prints where the report is, so it keeps it: a new temporary
    # folder by default (verify() alone would remove its own with the Report).
    scratch = None if args.out else tempfile.mkdtemp(prefix="ckpt_verify.")
    out = args.out or os.path.join(scratch, f"{kwargs['name']}.h5")
    try:
        report = verify(defs["model_fn"], defs["batch_fn"], defs["runs"], device=args.device, out=out, **kwargs)
    except (errors.BadInput, errors.RunError) as e:
        if scratch:  # nothing was written: leave no folder behind either
            shutil.rmtree(scratch, ignore_errors=True)
        what = f"bad input ({type(e).__name__})" if isinstance(e, errors.BadInput) else "the plain baseline failed"
        print(f"{args.script}: {what}: {e}; nothing written", file=sys.stderr)
        return 2
    except errors.JudgeError as e:  # the report is complete and kept
        print(f"{args.script}: {e}", file=sys.stderr)
        return 3
    print(report.table.rstrip())
    for run, why in report.skipped.items():
        print(f"{run}: skipped: {why}")
    print(f"memory: {report.memory_source}")
    print(f"report: {report.path} (judge: {report.judge_dir})")
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
