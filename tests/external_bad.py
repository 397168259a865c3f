#!/usr/bin/env python3
"""external_bad.py MODE REPORT: an --external command that misbehaves, for
the tests: `no_loss` appends a run without a loss, `remove_run` deletes
the harness's nonreentrant run, `bad_outcome` appends a run whose outcome
attribute is not one the schema knows."""
import sys

import h5py
import numpy as np

mode, report = sys.argv[1], sys.argv[2]
with h5py.File(report, "a") as f:
    if mode == "no_loss":
        f["runs/mine/steps/1/grads/l0.weight"] = np.zeros((4, 4), np.float32)
    elif mode == "remove_run":
        del f["runs/nonreentrant"]
    elif mode == "bad_outcome":
        f.copy(f["runs/baseline_0"], f["runs"], name="mine")
        f["runs/mine"].attrs["outcome"] = "exploded"
    else:
        sys.exit(f"unknown mode {mode}")
