#!/usr/bin/env python3
"""Writes the bad and the NaN report files the robustness tests feed to
`ckpt-verify diff` and `judge`, each a copy of one good report (argv[1])
with one thing wrong, into a directory (argv[2]). The dataset they damage
is argv[3] (a gradient of baseline_0, path inside the file; in the good
report every other run's tensor at that path is a hard link to it)."""
import os
import shutil
import sys
import zlib

import h5py
import numpy as np


def copy(src, out, name):
    path = os.path.join(out, name)
    shutil.copyfile(src, path)
    return path


def replace(f, path, values, dtype_attr):
    del f[path]
    f[path] = values
    f[path].attrs["dtype"] = dtype_attr


def set_bits(f, path, flat, bits):
    """Element `flat` of a float32 dataset gets the raw bits `bits`, and
    its crc32 the new data's checksum: a good file that holds a NaN."""
    values = f[path][()]
    view = values.reshape(-1).view(np.uint32)
    view[flat] = np.uint32(bits)
    f[path][...] = values
    f[path].attrs["crc32"] = np.int64(zlib.crc32(values.tobytes()))


def main() -> int:
    good, out, grad = sys.argv[1], sys.argv[2], sys.argv[3]
    os.makedirs(out, exist_ok=True)
    run = "/runs/baseline_0"

    with open(os.path.join(out, "not_hdf5.h5"), "w") as f:
        f.write("just some text, not an HDF5 file\n")
    open(os.path.join(out, "empty.h5"), "wb").close()
    data = open(good, "rb").read()
    with open(os.path.join(out, "truncated.h5"), "wb") as f:
        f.write(data[: len(data) // 2])

    with h5py.File(copy(good, out, "schema2.h5"), "r+") as f:
        f.attrs["schema_version"] = np.int64(2)
    with h5py.File(copy(good, out, "no_schema.h5"), "r+") as f:
        del f.attrs["schema_version"]
    with h5py.File(copy(good, out, "no_runs.h5"), "r+") as f:
        del f["/runs"]
    with h5py.File(copy(good, out, "no_steps.h5"), "r+") as f:
        del f[run + "/steps"]
    with h5py.File(copy(good, out, "no_loss.h5"), "r+") as f:
        del f[run + "/steps/1/loss"]

    with h5py.File(copy(good, out, "shape.h5"), "r+") as f:
        values = f[grad][()]
        replace(f, grad, values.reshape(-1)[:-1], "float32")
    with h5py.File(copy(good, out, "dtype.h5"), "r+") as f:
        replace(f, grad, f[grad][()].astype(np.float64), "float64")
    with h5py.File(copy(good, out, "dtype_attr_lies.h5"), "r+") as f:
        f[grad].attrs["dtype"] = "bfloat16"

    # A run deleted from a complete report (its /case impls still name it).
    with h5py.File(copy(good, out, "run_deleted.h5"), "r+") as f:
        del f["/runs/nonreentrant"]
    # A soft link where a tensor should be: reading past it would make the
    # run look as if it lacked the tensor.
    with h5py.File(copy(good, out, "soft_link.h5"), "r+") as f:
        del f[grad]
        f[grad] = h5py.SoftLink(grad.replace("baseline_0", "baseline_1"))
    # Checksums: one element of the dataset every run links to changed
    # under its crc32 (a bit flip on disk), and a crc32 that is not the
    # data's (the data intact).
    with h5py.File(copy(good, out, "corrupt_shared.h5"), "r+") as f:
        assert f[grad].attrs["crc32"] == zlib.crc32(f[grad][()].tobytes())
        values = f[grad][()]
        values.reshape(-1).view(np.uint32)[3] ^= np.uint32(1 << 20)
        f[grad].write_direct(values)
    with h5py.File(copy(good, out, "wrong_crc32.h5"), "r+") as f:
        f[grad].attrs["crc32"] = np.int64(zlib.crc32(f[grad][()].tobytes()) ^ 1)

    # Quiet NaN 0x7fc00000 and the same NaN with payload 1: both print as
    # "nan", only their bits differ.
    with h5py.File(copy(good, out, "nan_a.h5"), "r+") as f:
        set_bits(f, grad, 0, 0x7FC00000)
    with h5py.File(copy(good, out, "nan_a_again.h5"), "r+") as f:
        set_bits(f, grad, 0, 0x7FC00000)
    with h5py.File(copy(good, out, "nan_payload.h5"), "r+") as f:
        set_bits(f, grad, 0, 0x7FC00001)
    return 0


if __name__ == "__main__":
    sys.exit(main())
