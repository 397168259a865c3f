"""Writes a schema-1 report (docs/schema.md) with h5py: the attribute and
dataset types the C reader expects, to a temporary name renamed into place
only once the file is complete."""
import os
import time

import h5py
import numpy as np
import torch

from .errors import BadInput

SCHEMA_VERSION = 1

# torch dtype -> (numpy dtype of the stored data, the schema's `dtype` attr).
# Narrower signed integers widen to int64 (lossless), as the C reader does.
_STORED = {
    torch.float32: (np.float32, "float32"),
    torch.float64: (np.float64, "float64"),
    torch.float16: (np.float16, "float16"),
    torch.bfloat16: (np.uint16, "bfloat16"),   # raw bits, see docs/schema.md
    torch.int64: (np.int64, "int64"),
    torch.int32: (np.int64, "int64"),
    torch.int16: (np.int64, "int64"),
    torch.int8: (np.int64, "int64"),
    torch.uint8: (np.uint8, "uint8"),
    torch.bool: (np.uint8, "bool"),
}


def storable(t):
    """Whether the schema has a type for this tensor's dtype."""
    return t.dtype in _STORED


def _string_type(raw):
    """The harness's string type: fixed length, NUL-terminated, UTF-8."""
    tid = h5py.h5t.C_S1.copy()
    tid.set_size(len(raw) + 1)
    tid.set_strpad(h5py.h5t.STR_NULLTERM)
    tid.set_cset(h5py.h5t.CSET_UTF8)
    return h5py.Datatype(tid)


def set_attr(obj, key, value):
    """Strings as fixed-length UTF-8, whole numbers as int64, others float64."""
    if isinstance(value, str):
        raw = value.encode("utf-8")
        obj.attrs.create(key, np.array(raw, dtype=f"S{len(raw) + 1}"), dtype=_string_type(raw))
    elif isinstance(value, (bool, int, np.integer)) or (
            isinstance(value, float) and value.is_integer() and abs(value) < 2 ** 53):
        obj.attrs.create(key, np.int64(value))
    else:
        obj.attrs.create(key, np.float64(value))


def host_array(t):
    """A CPU tensor as (numpy array, schema dtype name), bits kept exactly."""
    if t.dtype not in _STORED:
        raise BadInput(f"tensor of dtype {t.dtype} has no type in the report schema")
    np_type, kind = _STORED[t.dtype]
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:
        data = t.view(torch.int16).numpy().view(np.uint16)
    elif t.dtype == torch.bool:
        data = t.numpy().astype(np.uint8)
    else:
        data = t.numpy().astype(np_type, copy=False)
    return data, kind


def write_tensor(group, path, t):
    data, kind = host_array(t)
    d = group.create_dataset(path, data=data)  # rank 0 stays a scalar dataspace
    set_attr(d, "dtype", kind)


def write_attrs(group, attrs):
    """Flat keys `memory.peak_bytes` -> subgroup `memory`, attr `peak_bytes`."""
    for key, value in attrs.items():
        head, _, name = key.partition(".")
        set_attr(group.require_group(head) if name else group, name or head, value)


def write_report(path, root_attrs, case_attrs, inputs, params_init, runs):
    """runs: list of objects with .name, .tensors ({path: cpu tensor}) and
    .attrs ({flat key: number or string}). Temporary name, then rename: a
    failure leaves any previous file at `path` untouched."""
    tmp = path + ".tmp"
    try:
        with h5py.File(tmp, "w", track_order=True) as f:
            set_attr(f, "schema_version", SCHEMA_VERSION)
            for key, value in root_attrs.items():
                set_attr(f, key, value)
            set_attr(f, "created_utc", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
            case = f.create_group("case", track_order=True)
            for key, value in case_attrs.items():
                set_attr(case, key, value)
            for key, t in inputs.items():
                write_tensor(f, f"inputs/{key}", t)
            for key, t in params_init.items():
                write_tensor(f, f"params_init/{key}", t)
            for run in runs:
                g = f.create_group(f"runs/{run.name}", track_order=True)
                for key, t in run.tensors.items():
                    write_tensor(g, key, t)
                write_attrs(g, run.attrs)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
