#!/usr/bin/env python3
"""check_torch_determinism_check.py CKPT_VERIFY OUT_DIR: torch's own
determinism check beside the harness's metadata check, on one planted bug.

The bug: a non-reentrant checkpoint whose recompute runs outside the
forward's bfloat16 autocast, so it saves float32 where forward saved
bfloat16 (the harness's `autocast_not_restored_nr`, case checks_dtype).
- torch 2.x, determinism_check="default": CheckpointError naming the
  metadata that differs (dtype); with debug=True the error carries the
  operator traces of forward and recompute (aten.mm / aten.addmm among
  them), the counterpart of the harness's op_log;
- torch, determinism_check="none": no CheckpointError; the float32 tensor
  reaches the backward, which fails on the dtype instead;
- the harness on checks_dtype: FAIL from its own check, "recomputed saved
  tensor #0 (op linear) has dtype float32", and on checks_determinism_none
  ERROR (the same backward failure).
Exit 0 when every side behaves so, 1 otherwise."""
import os
import subprocess
import sys

import h5py
import torch
from torch.utils.checkpoint import CheckpointError, checkpoint


def layer(x, w, b):
    return torch.nn.functional.gelu(torch.nn.functional.linear(x, w, b), approximate="tanh")


def planted_step(determinism_check, debug):
    """One bf16-autocast step through a checkpoint whose recompute leaves autocast."""
    torch.manual_seed(0)
    w = torch.randn(32, 32, requires_grad=True)
    b = torch.randn(32, requires_grad=True)
    x = torch.randn(4, 32, requires_grad=True)
    calls = []

    def region(inp):
        calls.append(1)
        if len(calls) == 1:
            return layer(inp, w, b)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=False):  # the planted bug
            return layer(inp, w, b)

    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = checkpoint(region, x, use_reentrant=False, determinism_check=determinism_check, debug=debug)
    y.float().sum().backward()


def outcome(determinism_check, debug=False):
    try:
        planted_step(determinism_check, debug)
    except CheckpointError as e:
        return "CheckpointError", str(e)
    except RuntimeError as e:
        return "RuntimeError", str(e)
    return "ok", ""


def main():
    cv, out = sys.argv[1], sys.argv[2]
    problems = []

    kind, text = outcome("default")
    print(f"torch {torch.__version__} determinism_check='default': {kind}: {text.splitlines()[0] if text else ''}")
    if kind != "CheckpointError" or "dtype" not in text:
        problems.append(f"determinism_check='default' gave {kind}, not a CheckpointError naming the dtype")
    if "aten.addmm" in text:
        problems.append("without debug=True the error already carries operator traces: the debug check proves nothing")

    kind, text = outcome("default", debug=True)
    traced = [op for op in ("aten.mm", "aten.addmm", "aten.gelu") if op in text]
    print(f"torch debug=True: {kind}; operator traces name {traced}")
    if kind != "CheckpointError" or not traced:
        problems.append(f"debug=True gave {kind} with no operator trace")

    kind, text = outcome("none")
    print(f"torch determinism_check='none': {kind}: {text.splitlines()[0] if text else ''}")
    if kind != "RuntimeError":
        problems.append(f"determinism_check='none' gave {kind}, not the backward's own error")

    # The harness on the same bug, with its check on (checks_dtype) and off.
    for case, want in (("checks_dtype", ("FAIL", "has dtype float32")), ("checks_determinism_none", ("ERROR", ""))):
        d = os.path.join(out, case)
        r = subprocess.run([cv, "--case", case, "--impl", "autocast_not_restored_nr", "--out", d],
                           capture_output=True, text=True)
        with h5py.File(os.path.join(d, f"{case}.h5"), "r") as f:
            a = f["verdicts/autocast_not_restored_nr"].attrs
            verdict = a["verdict"].decode() if isinstance(a["verdict"], bytes) else str(a["verdict"])
            reason = a["reason"].decode() if isinstance(a["reason"], bytes) else str(a["reason"])
        print(f"ckpt-verify {case}: autocast_not_restored_nr {verdict}: {reason.splitlines()[0]} (exit {r.returncode})")
        if verdict != want[0] or want[1] not in reason:
            problems.append(f"harness {case}: {verdict} ({reason.splitlines()[0]}), wanted {want[0]} {want[1]!r}")

    for p in problems:
        print(f"check_torch_determinism_check: {p}", file=sys.stderr)
    print("check_torch_determinism_check: " + ("both checks fire, and neither without its switch" if not problems
                                               else "WRONG"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
