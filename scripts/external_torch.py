#!/usr/bin/env python3
"""An `--external` adapter: runs a harness case again in PyTorch, with
torch.utils.checkpoint, and appends the runs to the harness's report so that
`ckpt-verify` judges them with its own:

    ckpt-verify --case gpt_none --external "$PWD/scripts/external_torch.py"

The harness calls it with the report's path as the last argument. It rebuilds
the case from the report alone (ckpt_verify.frontends.harness_twin: /case,
/inputs, /params_init) and appends

    torch_baseline_0, torch_baseline_1   the model trained plainly, twice
    torch_reentrant                      checkpoint(use_reentrant=True)
    torch_nonreentrant                   checkpoint(use_reentrant=False)

each style first trained once unrecorded (a warm-up: torch's first call of
a checkpoint style costs about a second, which a recorded step would show
as the checkpoint's overhead).

The checkpointed runs carry the attribute baselines = "torch_baseline": they
are judged against torch's own plain runs, so a case whose kernels differ
between the two frameworks (our fused bias+GELU against torch's unfused one,
2 ULP) still verifies torch's checkpoint exactly. Whether torch's plain run
matches ours is the cross-check's question (scripts/crosscheck.sh).

Another framework's adapter (TransformerEngine, torch_xla) has the same
shape: read the case and the initial state from the report, train plainly
twice and with its checkpoint, append the runs (docs/schema.md, docs/external.md).

usage: external_torch.py [--plant no_rng_preserve] REPORT.h5
Exit 0 when the runs were appended, 2 when the case cannot be rebuilt.

It runs from any directory and under any python3: started by a Python
that lacks h5py or torch (the system's python3), it runs itself again
under the tree's own environment (.venv, what scripts/python runs), so
`--external /path/to/ckpt-verify/scripts/external_torch.py` works as it
stands; without that environment it says so in one line, exit 2.
"""
import argparse
import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
_AGAIN = "CKPT_EXTERNAL_TORCH_REEXEC"  # set once: the tree's Python is never asked twice


def _needs_project_python():
    """Runs this script again under the tree's .venv when this Python lacks
    what it imports; one line and exit 2 when there is none to run."""
    missing = [m for m in ("h5py", "torch") if importlib.util.find_spec(m) is None]
    if not missing:
        return
    venv = os.path.join(HERE, "..", ".venv", "bin", "python")
    if os.access(venv, os.X_OK) and not os.environ.get(_AGAIN):
        os.environ[_AGAIN] = "1"
        os.execv(venv, [venv, os.path.abspath(__file__), *sys.argv[1:]])
    print(f"external_torch: {sys.executable} has no {' or '.join(missing)}, and the tree's environment "
          f"({os.path.normpath(venv)}) {'lacks them too' if os.environ.get(_AGAIN) else 'does not exist'}: run "
          f"bash scripts/setup-env.sh, or start this script with a Python that has them", file=sys.stderr)
    sys.exit(2)


if __name__ == "__main__":
    _needs_project_python()

import h5py  # noqa: E402

sys.path.insert(0, os.path.join(HERE, "..", "python"))
import torch  # noqa: E402

from ckpt_verify.errors import BadInput, CannotRebuild  # noqa: E402
from ckpt_verify.frontends import harness_twin as twin  # noqa: E402
from ckpt_verify.recorder import Recorder  # noqa: E402

FAMILY = "torch_baseline"
RUNS = (("torch_none", f"{FAMILY}_0"), ("torch_none", f"{FAMILY}_1"),
        ("torch_reentrant", "torch_reentrant"), ("torch_nonreentrant", "torch_nonreentrant"))


def append(report, plant=None):
    with h5py.File(report, "r") as f:
        case = twin.Case(f)
    if case.device != "cpu":
        raise CannotRebuild(f"case {case.name} runs on {case.device}; this adapter rebuilds cpu cases")
    if case.threads > 0:
        torch.set_num_threads(case.threads)
    with Recorder.append(report) as recorder:
        taken = [name for _, name in RUNS if recorder.has_run(name)]
        if taken:  # refused before any training, and before anything is written
            raise BadInput(f"/runs/{taken[0]} exists already")
        # One unrecorded run of each style first: torch's first call of a
        # checkpoint style (its lazy imports and set-up, about a second)
        # would otherwise land inside a recorded step and decide its median,
        # an overhead of thousands. The harness warms up the same way.
        for style in dict.fromkeys(style for style, _ in RUNS):
            twin.train(case, style, plant if style != "torch_none" else None, record=False)
        for style, name in RUNS:
            run = twin.train(case, style, plant if style != "torch_none" else None)
            run.name = name
            extra = {"producer": f"torch {torch.__version__} torch.utils.checkpoint"}
            if not name.startswith(FAMILY):
                extra["baselines"] = FAMILY
            recorder.add(run, extra)
    print(f"external_torch: {case.name}: appended {', '.join(name for _, name in RUNS)} (torch {torch.__version__})")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("report")
    ap.add_argument("--plant", choices=("no_rng_preserve",),
                    help="checkpoint without RNG replay (shows that a wrong torch run FAILs)")
    args = ap.parse_args(argv)
    try:
        append(args.report, args.plant)
    except (BadInput, OSError, KeyError) as e:
        print(f"external_torch: {args.report}: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
