"""The report schema's types (docs/schema.md), both ways: how a torch
tensor (or a numpy array: the JAX frontend's, whose environment has no
torch) or a Python value is stored in HDF5 exactly as the C reader expects
(fixed-length UTF-8 strings, int64 whole numbers, bfloat16 as raw bits),
and how a stored dataset is read back as the tensor it was. No file-level
layout lives here; that is the recorder's job (recorder.py)."""
import sys
import zlib

import h5py
import numpy as np

from .errors import BadInput

try:
    import torch
except ImportError:   # the JAX environment (env/jax-requirements.txt): numpy arrays only
    torch = None

SCHEMA_VERSION = 1

# torch dtype -> (numpy dtype of the stored data, the schema's `dtype` attr).
# Narrower signed integers widen to int64 (lossless), as the C reader does.
_STORED = {} if torch is None else {
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


# numpy dtype name -> the same, for numpy arrays (bfloat16 is ml_dtypes',
# which JAX uses; its bits are kept as they are).
_STORED_NUMPY = {
    "float32": (np.float32, "float32"),
    "float64": (np.float64, "float64"),
    "float16": (np.float16, "float16"),
    "bfloat16": (np.uint16, "bfloat16"),
    "int64": (np.int64, "int64"),
    "int32": (np.int64, "int64"),
    "int16": (np.int64, "int64"),
    "int8": (np.int64, "int64"),
    "uint8": (np.uint8, "uint8"),
    "bool": (np.uint8, "bool"),
}


def storable(t) -> bool:
    """Whether the schema has a type for this tensor's (or array's) dtype."""
    if isinstance(t, (np.ndarray, np.generic)):
        return t.dtype.name in _STORED_NUMPY
    return t.dtype in _STORED


def _string_type(raw):
    """The harness's string type: fixed length, NUL-terminated, UTF-8."""
    tid = h5py.h5t.C_S1.copy()
    tid.set_size(len(raw) + 1)
    tid.set_strpad(h5py.h5t.STR_NULLTERM)
    tid.set_cset(h5py.h5t.CSET_UTF8)
    return h5py.Datatype(tid)


# Strings up to this many bytes are stored fixed-length; longer ones
# variable-length, since HDF5 keeps a fixed-length attribute's value in the
# object header, which holds at most 64 KiB (h5store.h
# H5STORE_FIXED_STRING_MAX; readers take both).
FIXED_STRING_MAX = 60000


def set_attr(obj, key: str, value) -> None:
    """Strings as UTF-8 (fixed-length up to FIXED_STRING_MAX bytes,
    variable-length past it), whole numbers as int64, others float64."""
    if isinstance(value, str):
        raw = value.encode("utf-8")
        if len(raw) > FIXED_STRING_MAX:
            obj.attrs.create(key, value, dtype=h5py.string_dtype("utf-8"))
        else:
            obj.attrs.create(key, np.array(raw, dtype=f"S{len(raw) + 1}"), dtype=_string_type(raw))
    elif isinstance(value, (bool, int, np.integer)) or (
            isinstance(value, float) and value.is_integer() and abs(value) < 2 ** 53):
        obj.attrs.create(key, np.int64(value))
    else:
        obj.attrs.create(key, np.float64(value))


def attr_text(value) -> str:
    """A stored attribute as text (h5py gives fixed-length strings as bytes)."""
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def _numpy_array(a):
    a = np.asarray(a)
    if a.dtype.name not in _STORED_NUMPY:
        raise BadInput(f"array of dtype {a.dtype} has no type in the report schema")
    np_type, kind = _STORED_NUMPY[a.dtype.name]
    a = np.array(a, order="C", copy=None)   # not ascontiguousarray: it makes a scalar (a loss) 1-d
    if kind == "bfloat16":
        return a.view(np.uint16), kind
    return a.astype(np_type, copy=False), kind


def host_array(t):
    """A tensor (or numpy array) as (numpy array, schema dtype name), bits
    kept exactly."""
    if isinstance(t, (np.ndarray, np.generic)):
        return _numpy_array(t)
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


def checksum(data: np.ndarray) -> int:
    """The `crc32` attribute of a stored array: zlib's CRC-32 of its bytes
    as stored (row-major, little-endian; docs/schema.md)."""
    if data.dtype.byteorder == ">" or (data.dtype.byteorder == "=" and sys.byteorder == "big"):
        data = data.astype(data.dtype.newbyteorder("<"))
    return zlib.crc32(np.ascontiguousarray(data).reshape(-1).view(np.uint8))


def write_array(group, path: str, data: np.ndarray, kind: str, crc: int | None = None) -> None:
    """A new dataset of host_array()'s output, with its `dtype` and `crc32`
    attributes (crc: the checksum when the caller has it already)."""
    d = group.create_dataset(path, data=data)  # rank 0 stays a scalar dataspace
    set_attr(d, "dtype", kind)
    d.attrs.create("crc32", np.int64(checksum(data) if crc is None else crc))


def write_tensor(group, path: str, t) -> None:
    data, kind = host_array(t)
    write_array(group, path, data, kind)


def write_attrs(group, attrs: dict) -> None:
    """Flat keys `memory.peak_bytes` -> subgroup `memory`, attr `peak_bytes`."""
    for key, value in attrs.items():
        head, _, name = key.partition(".")
        set_attr(group.require_group(head) if name else group, name or head, value)


def read_tensor(dataset) -> "torch.Tensor":
    """A dataset of the schema as a torch tensor of its stored dtype."""
    data = dataset[()]
    kind = attr_text(dataset.attrs.get("dtype", "")).split(".")[-1]
    if kind == "bfloat16":
        # The file keeps the raw bits; reinterpret them, never convert.
        return torch.from_numpy(np.ascontiguousarray(data).view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(np.array(data))


def read_values(dataset) -> np.ndarray:
    """A dataset's values as float64 (bfloat16 bits widened exactly)."""
    data = dataset[()]
    if attr_text(dataset.attrs.get("dtype", "")).split(".")[-1] == "bfloat16":
        data = (np.asarray(data).astype(np.uint32) << 16).view(np.float32)
    return np.asarray(data, dtype=np.float64)
