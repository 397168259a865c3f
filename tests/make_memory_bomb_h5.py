"""make_memory_bomb_h5.py GOOD.h5 OUT.h5 [ROWS]: a copy of a good report whose
run baseline_0 holds one ROWS x 1024 float32 gradient (default 4096 rows:
16 MiB) never written (chunked, compressed: a few KiB in the file) and
hard-linked under 6 names (96 MiB counted per name) in a small file.
`diff` and `judge` hold a few tensors at a time: they must refuse it
(exit 2) from the largest dataset's claimed size before loading anything
when that many of it pass the memory limit, and otherwise never load a
linked dataset more than once at a time."""
import shutil
import sys

import h5py

good, out = sys.argv[1], sys.argv[2]
rows = int(sys.argv[3]) if len(sys.argv) > 3 else 4096
shutil.copy(good, out)
with h5py.File(out, "a") as f:
    grads = f["runs/baseline_0/steps/1/grads"]
    big = grads.create_dataset("big", shape=(rows, 1024), dtype="<f4", chunks=(256, 1024),
                               compression="gzip", fillvalue=0.0)
    big.attrs["dtype"] = b"float32"
    for k in range(2, 7):
        grads["big%d" % k] = big
