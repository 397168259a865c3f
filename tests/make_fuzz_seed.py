#!/usr/bin/env python3
"""Writes the h5py-made seed of the HDF5 fuzzer (argv[1]): a small report
in the schema with every element type the reader takes (float32/64, IEEE
half, bfloat16 as uint16 bits, int64, uint8, bool as h5py's enum),
variable-length string attributes, scalar and empty datasets, NaN and Inf,
and two runs to compare. The other seed is a report the harness wrote."""
import sys

import h5py
import numpy as np


def run(f, name, scale):
    g = f.create_group("/runs/" + name)
    g.attrs["steps"] = 1
    mem = g.create_group("memory")
    mem.attrs["peak_bytes"] = np.int64(4096)
    g.create_group("timing").attrs["forward_ms"] = 0.25
    s = g.create_group("steps/1")
    s["loss"] = np.float32(0.5 * scale)
    grads = s.create_group("grads")
    grads["w"] = (np.arange(6, dtype=np.float16).reshape(2, 3) * scale)
    grads["w"].attrs["dtype"] = "float16"
    bits = np.array([0x3F80, 0x7FC0, 0x7F80, 0x0001], dtype=np.uint16)
    grads["b"] = bits
    grads["b"].attrs["dtype"] = "bfloat16"
    grads["d"] = np.array([1.0, np.nan, -np.inf, -0.0]) * scale
    grads["i"] = np.array([[-(2**63), 2**63 - 1]], dtype=np.int64)
    grads["m"] = np.array([True, False, True])
    grads["u"] = np.array([0, 255], dtype=np.uint8)
    grads["e"] = np.zeros((0, 3), dtype=np.float32)
    g["final_params/w"] = np.ones((2, 3), dtype=np.float32) * np.float32(scale)
    g["final_params/w"].attrs["dtype"] = "torch.float32"


def main() -> int:
    with h5py.File(sys.argv[1], "w") as f:
        f.attrs["schema_version"] = np.int64(1)
        f.attrs["case"] = "fuzz_seed"
        f["/inputs/x"] = np.ones((1, 1, 2), dtype=np.float32)
        run(f, "baseline_0", 1.0)
        run(f, "reentrant", 2.0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
