"""python -m ckpt_verify [--device D] [--out FILE.h5] [--verbose] [...] SCRIPT.py [ARGS...]

Runs verify() on what SCRIPT.py defines at module level: model_fn,
batch_fn and runs (required); baseline, expect, steps, seed, lr,
tolerance, min_memory_saving, min_held_cut, noise_runs, name, model_definition, and for
distributed runs world_size, parallel, backend, parallel_options, timeout,
against_single (docs/distributed.md) (optional; command-line options win).
Options go before SCRIPT.py, as for `python -m pdb`: everything after it is
the script's own arguments (its sys.argv[1:]). The script's directory is
put on sys.path first, so it can import its neighbours.

Exit status, the same contract as the `ckpt-verify` binary:
  0  every verdict as expected
  1  an unexpected verdict (a run that raised is judged ERROR)
  2  bad input, nothing written: the script cannot be loaded or defines
     too little, a framework it needs is not in this Python ("device='xla'
     needs torch_xla: run it with scripts/python-xla"), batch_fn or
     model_fn raises, the plain baseline raises, the report cannot be
     written at --out (a read-only or full file system: no temporary is
     left). The directories above --out that do not exist are created,
     as the ckpt-verify binary creates its --out directory (and removed
     again when nothing is written)
  3  an internal error of ckpt_verify, or the judge failed (the report is
     kept and named)
A script that calls sys.exit(N) itself (its own argument parser, say) ends
the command with its status N, after a line on stderr that says so, since
N may read as one of the statuses above.

Every failure is one line on stderr, "SCRIPT: what happened". The traceback
of the user's code that raised is kept where there is a report (an ERROR
run's `traceback` attribute) and printed with --verbose."""
import argparse
import os
import runpy
import shutil
import sys
import tempfile
import traceback

REQUIRED = ("model_fn", "batch_fn", "runs")
OPTIONAL = ("baseline", "expect", "steps", "seed", "lr", "tolerance", "min_memory_saving", "min_held_cut",
            "noise_runs", "name", "model_definition", "world_size", "parallel", "backend", "parallel_options",
            "timeout", "against_single")

# A framework a script may import, and the project's Python that has it.
ENVIRONMENTS = {"torch_xla": "scripts/python-xla", "jax": "scripts/python-jax", "jaxlib": "scripts/python-jax",
                "torch": "scripts/python"}

EXIT_BAD_INPUT, EXIT_INTERNAL = 2, 3


def _load(script, script_args):
    if not os.path.isfile(script):
        raise FileNotFoundError(f"{script}: no such file")
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    saved, sys.argv = sys.argv, [script, *script_args]
    try:
        return runpy.run_path(script, run_name="__ckpt_verify__")
    finally:
        sys.argv = saved


def _one_line(text: str) -> str:
    """The first line of a message; the rest is for --verbose."""
    lines = str(text).strip().split("\n")
    return lines[0] + (" [...]" if len(lines) > 1 else "")


def _needs(e: BaseException) -> str | None:
    """'needs X: run it with Y' for a ModuleNotFoundError of a framework
    that another of the project's Pythons has, else None."""
    name = (getattr(e, "name", None) or "").split(".")[0]
    if isinstance(e, ModuleNotFoundError) and name in ENVIRONMENTS:
        return f"needs {name}, which this Python does not have: run it with {ENVIRONMENTS[name]}"
    return None


class _Cli:
    """Says one line per failure, and the traceback with --verbose."""

    def __init__(self, script: str, verbose: bool):
        self.script, self.verbose = script, verbose

    def say(self, text: str) -> None:
        print(f"{self.script}: {text}", file=sys.stderr)

    def trace(self, e: BaseException) -> None:
        if self.verbose:
            text = getattr(e, "traceback", None) or "".join(traceback.format_exception(type(e), e, e.__traceback__))
            print(text.rstrip("\n"), file=sys.stderr)

    def exited(self, e: SystemExit, when: str) -> int:
        """The script's own sys.exit: its status, said first."""
        if e.code is None or isinstance(e.code, int):
            status = e.code or 0
            self.say(f"the script called sys.exit({e.code!r}) {when}; passing its status {status} on "
                     f"(nothing was verified)")
            return status
        self.say(f"the script exited {when}: {_one_line(e.code)}")
        return EXIT_BAD_INPUT


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ckpt_verify", description=__doc__.split("\n\n")[0],
                                 epilog="exit status: 0 as expected, 1 an unexpected verdict, 2 bad input "
                                        "(nothing written), 3 internal or judge failure",
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu", help="cpu (default), cuda, cuda:N or xla (under scripts/python-xla)")
    ap.add_argument("--out", help="report file (default: a new temporary directory)")
    ap.add_argument("--steps", type=int, help="training steps per run")
    ap.add_argument("--seed", type=int, help="the seed of every run")
    ap.add_argument("--world-size", dest="world_size", type=int,
                    help="train every run on N torch.distributed ranks (docs/distributed.md)")
    ap.add_argument("--parallel", choices=("ddp", "fsdp", "fsdp2"), help="with --world-size: the wrapper")
    ap.add_argument("--judge", help="the ckpt-verify binary (default: $CKPT_VERIFY, PATH, the tree's build/)")
    ap.add_argument("--verbose", action="store_true",
                    help="on a failure, also print the traceback of the code that raised")
    ap.add_argument("script", help="a Python file defining model_fn, batch_fn and runs")
    ap.add_argument("script_args", nargs=argparse.REMAINDER, metavar="ARGS",
                    help="the script's own arguments (its sys.argv[1:]); options of this command go before SCRIPT")
    args = ap.parse_args(argv)
    cli = _Cli(args.script, args.verbose)

    try:
        from . import errors  # after argparse: --help needs no torch
        from .verify import make_parents, remove_dirs, verify
    except ImportError as e:
        cli.say(f"ckpt_verify {_needs(e) or f'cannot start: {type(e).__name__}: {e}'}")
        cli.trace(e)
        return EXIT_BAD_INPUT

    try:
        defs = _load(args.script, args.script_args)
    except SystemExit as e:  # the script's own argument parser refused (or --help), or its own exit
        return cli.exited(e, "while loading")
    except Exception as e:  # the user's script failed to load: bad input
        cli.say(_needs(e) or f"cannot load the script: {type(e).__name__}: {_one_line(e)}")
        cli.trace(e)
        return EXIT_BAD_INPUT
    missing = [n for n in REQUIRED if n not in defs]
    if missing:
        cli.say(f"defines no {', '.join(missing)} (needs model_fn, batch_fn and runs)")
        return EXIT_BAD_INPUT
    kwargs = {n: defs[n] for n in OPTIONAL if n in defs}
    kwargs.setdefault("name", os.path.splitext(os.path.basename(args.script))[0])
    for key in ("steps", "seed", "judge", "world_size", "parallel"):
        if getattr(args, key) is not None:
            kwargs[key] = getattr(args, key)
    # The CLI prints where the report is, so it keeps it: a new temporary
    # folder by default (verify() alone would remove its own with the Report).
    scratch = None if args.out else tempfile.mkdtemp(prefix="ckpt_verify.")
    out = args.out or os.path.join(scratch, f"{kwargs['name']}.h5")
    made = []
    if args.out:  # its directory is made as the ckpt-verify binary makes its --out
        try:
            made = make_parents(args.out)
        except OSError as e:
            cli.say(f"bad input: --out {args.out}: {e}; nothing written")
            return EXIT_BAD_INPUT
    try:
        report = verify(defs["model_fn"], defs["batch_fn"], defs["runs"], device=args.device, out=out, **kwargs)
    except errors.JudgeError as e:  # the report is complete and kept
        cli.say(_one_line(e))
        cli.trace(e)
        return EXIT_INTERNAL
    except BaseException as e:
        if scratch:  # nothing was written: leave no folder behind either
            shutil.rmtree(scratch, ignore_errors=True)
        remove_dirs(made)
        if isinstance(e, (errors.MissingFrontend, errors.ReportNotWritable)):
            cli.say(_one_line(e))
        elif isinstance(e, errors.BadInput):
            cli.say(f"bad input ({type(e).__name__}): {_one_line(e)}; nothing written")
        elif isinstance(e, errors.RunError):
            cli.say(f"the plain baseline failed: {_one_line(e)}; nothing written")
        elif isinstance(e, SystemExit):
            return cli.exited(e, "while it was verified")
        elif isinstance(e, KeyboardInterrupt):
            cli.say("interrupted; nothing written")
            return 130
        elif isinstance(e, Exception):
            cli.say(f"internal error: {type(e).__name__}: {_one_line(e)}; nothing written "
                    f"({'traceback below' if args.verbose else 'run with --verbose for the traceback'})")
            cli.trace(e)
            return EXIT_INTERNAL
        else:
            raise
        cli.trace(e)
        return EXIT_BAD_INPUT
    print(report.table.rstrip())
    for run, why in report.skipped.items():
        print(f"{run}: skipped: {why}")
    print(f"memory: {report.memory_source}")
    print(f"report: {report.path} (judge: {report.judge_dir})")
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
