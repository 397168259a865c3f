#!/usr/bin/env python3
"""Copies a report file and moves one element of one dataset by one ULP
(toward +inf), printing the flat index it changed; its crc32, when it has
one, is the new data's (a good file, not a corrupt one). Used by the CTest
integration test of `ckpt-verify diff`."""
import shutil
import sys
import zlib

import h5py
import numpy as np


def main() -> int:
    src, dst, dataset, flat = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    shutil.copyfile(src, dst)
    with h5py.File(dst, "r+") as f:
        d = f[dataset]
        values = d[()]
        flat_view = values.reshape(-1)
        flat_view[flat] = np.nextafter(flat_view[flat], np.float32(np.inf), dtype=np.float32)
        d[...] = values
        if "crc32" in d.attrs:
            d.attrs["crc32"] = np.int64(zlib.crc32(values.tobytes()))
        print(np.unravel_index(flat, values.shape))
    return 0


if __name__ == "__main__":
    sys.exit(main())
