"""make_external_h5.py GOOD.h5 OUT_DIR: copies of a good report whose data
lies in other files, each of which `diff` must refuse (exit 2) rather than
read: /runs/baseline_0 an external link (ext_run.h5), one step of it an
external link (ext_step.h5), one gradient in external storage
(ext_storage.h5). The link targets are whole, identical copies of the run,
so following them would report "bitwise identical"."""
import shutil
import sys

import h5py

good, out = sys.argv[1], sys.argv[2]
shutil.copy(good, out + "/other.h5")


def copy_with(name, change):
    shutil.copy(good, out + "/" + name)
    with h5py.File(out + "/" + name, "a") as f:
        change(f)


def run_link(f):
    del f["runs/baseline_0"]
    f["runs/baseline_0"] = h5py.ExternalLink("other.h5", "/runs/baseline_0")


def step_link(f):
    del f["runs/baseline_0/steps/1"]
    f["runs/baseline_0/steps/1"] = h5py.ExternalLink("other.h5", "/runs/baseline_0/steps/1")


def external_storage(f):
    path = "runs/baseline_0/steps/1/grads/l0.weight"
    data = f[path][...]
    dtype_attr = f[path].attrs["dtype"]
    del f[path]
    data.tofile(out + "/raw.bin")
    ds = f.create_dataset(path, shape=data.shape, dtype=data.dtype,
                          external=[("raw.bin", 0, data.nbytes)])
    ds.attrs["dtype"] = dtype_attr


copy_with("ext_run.h5", run_link)
copy_with("ext_step.h5", step_link)
copy_with("ext_storage.h5", external_storage)
