#!/usr/bin/env python3
"""check_judge_errors.py OUT_DIR: when the judge cannot give verdicts
verify() raises JudgeError and keeps the complete report; a summary.json
without records is a JudgeError, not an empty result."""
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))

import h5py  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import ckpt_verify  # noqa: E402
from ckpt_verify.judge import parse_summary  # noqa: E402


def step(model, batch):
    return F.mse_loss(model(batch[0]), batch[1])


def main():
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    problems = []
    out = os.path.join(out_dir, "no_judge.h5")
    try:
        ckpt_verify.verify(lambda: torch.nn.Linear(3, 3), lambda k: (torch.randn(2, 3), torch.randn(2, 3)),
                           {"again": step}, baseline=step, out=out, judge=os.path.join(out_dir, "no-such-binary"))
        problems.append("verify() with a missing judge raised nothing")
    except ckpt_verify.JudgeError as e:
        print(f"missing judge: JudgeError: {e}")
    with h5py.File(out, "r") as f:
        if int(f.attrs["schema_version"]) != 1 or sorted(f["runs"]) != ["again", "baseline_0", "baseline_1"]:
            problems.append(f"the kept report is not complete: runs {sorted(f['runs'])}")
    summary = os.path.join(out_dir, "summary.json")
    with open(summary, "w") as f:
        json.dump({"schema_version": 1}, f)
    try:
        parse_summary(summary, "no_judge")
        problems.append("a summary without records parsed")
    except ckpt_verify.JudgeError as e:
        print(f"no records: JudgeError: {e}")
    for p in problems:
        print(f"check_judge_errors: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
