"""make_memory_bomb_h5.py GOOD.h5 OUT.h5: a copy of a good report whose run
baseline_0 holds one 16 MiB gradient never written (chunked, compressed:
a few KiB in the file) and hard-linked under 6 names, so reading the run
loads 96 MiB from a small file. With CKPT_MEMORY_LIMIT=64M `diff` must
refuse it (exit 2) before loading past the limit."""
import shutil
import sys

import h5py

good, out = sys.argv[1], sys.argv[2]
shutil.copy(good, out)
with h5py.File(out, "a") as f:
    grads = f["runs/baseline_0/steps/1/grads"]
    big = grads.create_dataset("big", shape=(4096, 1024), dtype="<f4", chunks=(256, 1024),
                               compression="gzip", fillvalue=0.0)
    big.attrs["dtype"] = b"float32"
    for k in range(2, 7):
        grads["big%d" % k] = big
