#!/usr/bin/env python3
"""check_run_error.py OUT_DIR: a checkpointed run whose step raises is
recorded (outcome=error, the message) and judged ERROR; a baseline that
raises stops verify() with RunError and writes nothing."""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import ckpt_verify  # noqa: E402


def step(model, batch):
    return F.mse_loss(model(batch[0]), batch[1])


def crashes_in_step_2(model, batch):
    # Counted on the model: a warm-up, if the run gets one, trains a model of its own.
    model.calls = getattr(model, "calls", 0) + 1
    if model.calls == 2:
        raise RuntimeError("recompute lost its handle")
    return step(model, batch)


def model_fn():
    return torch.nn.Linear(3, 3)


def batch_fn(k):
    return torch.randn(2, 3), torch.randn(2, 3)


def main():
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    problems = []
    report = ckpt_verify.verify(model_fn, batch_fn, {"crashes": crashes_in_step_2}, baseline=step,
                                expect={"crashes": "ERROR"}, out=os.path.join(out_dir, "run_error.h5"))
    print(report)
    v = report.verdicts["crashes"]
    if v.verdict != "ERROR" or not v.expected or "recompute lost its handle" not in v.reason:
        problems.append(f"crashes: {v.verdict} ({v.reason}), ERROR naming the exception wanted")
    bad_dir = os.path.join(out_dir, "baseline_raises")
    os.makedirs(bad_dir, exist_ok=True)

    def broken(model, batch):
        raise ValueError("plain step broken")
    try:
        ckpt_verify.verify(model_fn, batch_fn, {"mine": step}, baseline=broken, out=os.path.join(bad_dir, "r.h5"))
        problems.append("a raising baseline raised nothing")
    except ckpt_verify.RunError as e:
        print(f"baseline raises: RunError: {e}")
    if os.listdir(bad_dir):
        problems.append(f"a raising baseline wrote {os.listdir(bad_dir)}")
    for p in problems:
        print(f"check_run_error: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
