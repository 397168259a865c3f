"""The one recorder: every frontend (eager user models, the torch twin of
the harness's models, ...) streams its runs into a schema-1 report
(docs/schema.md) through it.

A run is written as it is produced: Recorder.begin_run(name) opens
/runs/<name> and returns a RunWriter, whose add(path, tensor) writes one
tensor at once (the caller keeps nothing), and whose finish(attrs) closes
the run. A run that cannot finish is either kept as an ERROR run (finish
with outcome="error": what it wrote so far, judged ERROR) or removed whole
(abort()), so the file never holds a run that is neither complete nor
marked. A RunRecord ({path: tensor} in memory) is still accepted from small
producers (the harness twin, the distributed ranks): Recorder.add(record)
writes it through a RunWriter.

Identical tensors are stored once (docs/schema.md, "Identical tensors"):
before writing /runs/<run>/<path>, the writer looks at the same <path> under
the run's reference run, "<family>_0" where <family> is the run's
`baselines` attribute or "baseline"; when dtype, shape and bytes are equal
it makes a hard link to that dataset instead of a copy. Every dataset it
creates carries `crc32` (zlib CRC-32 of the stored bytes, int64). So a run
that is bitwise its reference adds almost no bytes, and the writer knows,
without keeping anything, whether the run was (RunWriter.identical).

A new report is written under a temporary name ("<path>.tmp") and renamed
into place by commit(): a failure, or leaving the `with` block by an
exception, leaves any previous file at the path untouched. Appending to an
existing report (Recorder.append) writes in place and refuses a run name
the file already has, before writing anything."""
import ctypes
import os
import time
from typing import TYPE_CHECKING

import h5py
import numpy as np

from .errors import BadInput
from .schema import SCHEMA_VERSION, attr_text, host_array, set_attr, write_array, write_attrs, write_tensor

if TYPE_CHECKING:  # the recorder itself needs no torch (the JAX frontend has none)
    import torch

# Paths under a run that hold facts about the run (its hooks, its live
# bytes), not results: not part of "the run is bitwise its reference".
_FACTS = ("checks/",)


class RunRecord:
    """One run's results held in memory, for small producers; add() takes a
    CPU copy. Large runs go to a RunWriter instead, step by step."""

    def __init__(self, name: str):
        self.name = name
        self.tensors: dict = {}  # "steps/1/loss" -> cpu tensor, in the order written
        self.attrs: dict = {}    # "timing.forward_ms" -> number or string

    def add(self, path: str, t: "torch.Tensor") -> None:
        t = t.detach()
        self.tensors[path] = t.cpu() if t.device.type != "cpu" else t.clone()


def reference_run(name: str, baselines: str | None) -> str:
    """The run whose datasets a run's identical tensors link to: the first
    run of its baseline family (docs/schema.md)."""
    return f"{baselines or 'baseline'}_0"


def _libc_memcmp():
    try:
        fn = ctypes.CDLL(None).memcmp
    except (OSError, AttributeError):
        return None
    fn.restype, fn.argtypes = ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
    return fn


_MEMCMP = _libc_memcmp()  # a constant: libc's memcmp (several GB/s), or None


def _bytes_equal(a: np.ndarray, b: np.ndarray) -> bool:
    """Bitwise equality of two stored arrays (NaN payloads included)."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    if _MEMCMP is not None:
        return a.nbytes == 0 or _MEMCMP(a.ctypes.data, b.ctypes.data, a.nbytes) == 0
    ua, ub = a.reshape(-1).view(np.uint8), b.reshape(-1).view(np.uint8)
    return bool(np.array_equal(ua, ub))


class RunWriter:
    """One run being written. add(path, tensor) stores it now (a new
    dataset with crc32, or a hard link to the reference run's identical
    dataset); finish(attrs) writes the attributes and closes the run;
    abort() removes it. `attrs` may be filled while the run trains."""

    def __init__(self, recorder: "Recorder", name: str, baselines: str | None):
        self.name, self.attrs = name, {}
        self._recorder = recorder
        f = recorder.file
        self._group = f.create_group(f"runs/{name}", track_order=True)
        ref = reference_run(name, baselines)
        self._ref = f[f"runs/{ref}"] if ref != name and f"runs/{ref}" in f else None
        self.reference = ref if self._ref is not None else None
        self._results: set = set()   # paths of results written (not checks/)
        self._differs = self._ref is None
        self.new_bytes = 0           # bytes of tensor data written as new datasets
        self.linked_bytes = 0        # bytes stored once, as links to the reference's
        self.open = True

    def add(self, path: str, t: "torch.Tensor") -> None:
        """Writes the tensor at /runs/<name>/<path>, linked when it is
        bitwise the reference run's tensor at the same path."""
        data, kind = host_array(t)
        fact = path.startswith(_FACTS)
        if not fact:
            self._results.add(path)
        ref = self._ref.get(path) if self._ref is not None else None
        if isinstance(ref, h5py.Dataset) and self._same(ref, data, kind):
            self._group[path] = ref  # a hard link: h5py and h5dump read it as a dataset
            self.linked_bytes += data.nbytes
            return
        if not fact:
            self._differs = True
        write_array(self._group, path, data, kind)
        self.new_bytes += data.nbytes

    @staticmethod
    def _same(ref: h5py.Dataset, data: np.ndarray, kind: str) -> bool:
        """dtype, schema dtype, shape and bytes equal. The bytes are
        compared directly (the reference read back, one tensor; memcmp):
        most runs pass, and for them a checksum first would only add its
        own pass over the data."""
        if ref.shape != data.shape or ref.dtype != data.dtype:
            return False
        if attr_text(ref.attrs.get("dtype", "")).split(".")[-1] != kind:
            return False
        return _bytes_equal(ref[()], data)

    @property
    def identical(self) -> bool:
        """Every result of the run (all but checks/) is bitwise the
        reference run's, and the run has exactly the reference's results.
        Meaningful after finish(); False without a reference."""
        if self._differs or self._ref is None:
            return False
        return self._results == set(result_paths(self._ref))

    def finish(self, extra_attrs: dict | None = None) -> None:
        """Writes the run's attributes (self.attrs, then extra_attrs): the
        run is complete."""
        try:
            write_attrs(self._group, self.attrs)
            for key, value in (extra_attrs or {}).items():
                set_attr(self._group, key, value)
        except BaseException:
            self.abort()
            raise
        self.open = False

    def abort(self) -> None:
        """Removes the run from the file: no half-written run is left."""
        if self.open:
            self.open = False
            del self._recorder.file[f"runs/{self.name}"]


def result_paths(group: h5py.Group) -> list:
    """The dataset paths of a run's results (all but checks/), in order."""
    paths: list = []

    def visit(path, obj):
        if isinstance(obj, h5py.Dataset) and not path.startswith(_FACTS):
            paths.append(path)
    group.visititems(visit)
    return paths


def same_results(file: h5py.File, a: str, b: str, skip: tuple = ()) -> bool:
    """Whether runs a and b of the file recorded bitwise the same results
    (all but checks/ and the `skip` prefixes), read one tensor at a time;
    two paths to one dataset (a hard link) are equal unread. No verdict:
    the C judge decides; this only says whether another run is worth taking."""
    ga, gb = file[f"runs/{a}"], file[f"runs/{b}"]
    pa = [p for p in result_paths(ga) if not p.startswith(skip)]
    if set(pa) != {p for p in result_paths(gb) if not p.startswith(skip)}:
        return False
    for path in pa:
        da, db = ga[path], gb[path]
        if da.id == db.id:
            continue
        if attr_text(da.attrs.get("dtype", "")) != attr_text(db.attrs.get("dtype", "")):
            return False
        if not _bytes_equal(da[()], db[()]):
            return False
    return True


class Recorder:
    """Streams runs into one report; use as a context manager."""

    def __init__(self, path: str, file: h5py.File, final_path: str | None):
        self.path, self._file, self._final = path, file, final_path

    @classmethod
    def create(cls, path: str, root_attrs: dict, case_attrs: dict | None = None, inputs: dict | None = None,
               params_init: dict | None = None, copy_from: h5py.File | None = None) -> "Recorder":
        """A new report at `path` (written as path + ".tmp" until commit()).
        /case, /inputs and /params_init come from the arguments, or are
        copied whole from `copy_from` (a report whose case is re-run)."""
        tmp = path + ".tmp"
        f = h5py.File(tmp, "w", track_order=True)
        rec = cls(tmp, f, path)
        try:
            set_attr(f, "schema_version", SCHEMA_VERSION)
            for key, value in root_attrs.items():
                set_attr(f, key, value)
            set_attr(f, "created_utc", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
            if copy_from is not None:
                for name in ("case", "inputs", "params_init"):
                    copy_from.copy(copy_from[name], f, name=name)
            else:
                case = f.create_group("case", track_order=True)
                for key, value in (case_attrs or {}).items():
                    set_attr(case, key, value)
                for key, t in (inputs or {}).items():
                    write_tensor(f, f"inputs/{key}", t)
                for key, t in (params_init or {}).items():
                    write_tensor(f, f"params_init/{key}", t)
        except BaseException:
            rec.abort()
            raise
        return rec

    @classmethod
    def append(cls, path: str) -> "Recorder":
        """An existing report, to which runs are added in place."""
        try:
            f = h5py.File(path, "r+")
        except OSError as e:
            raise BadInput(f"{path}: cannot open the report for appending ({e})") from e
        return cls(path, f, None)

    @property
    def file(self) -> h5py.File:
        return self._file

    def has_run(self, name: str) -> bool:
        return f"runs/{name}" in self._file

    def begin_run(self, name: str, baselines: str | None = None) -> RunWriter:
        """Opens /runs/<name> for writing; `baselines` is the run's family
        attribute (also written as its `baselines` attribute), which picks
        the reference run its identical tensors link to."""
        if self.has_run(name):
            raise BadInput(f"{self._final or self.path}: /runs/{name} exists already")
        writer = RunWriter(self, name, baselines)
        if baselines:
            writer.attrs["baselines"] = baselines
        return writer

    def add(self, run: RunRecord, extra_attrs: dict | None = None) -> RunWriter:
        """Writes a whole RunRecord as /runs/<name>: its tensors, then its
        attributes (extra_attrs last). Returns the finished writer."""
        extra = dict(extra_attrs or {})
        baselines = extra.pop("baselines", None) or run.attrs.get("baselines")
        writer = self.begin_run(run.name, baselines)
        try:
            for key, t in run.tensors.items():
                writer.add(key, t)
        except BaseException:
            writer.abort()
            raise
        writer.attrs.update({k: v for k, v in run.attrs.items() if k != "baselines"})
        writer.finish(extra)
        return writer

    def set_case_attr(self, key: str, value) -> None:
        """A /case attribute known only once the runs are done (for example
        the runs that were skipped)."""
        set_attr(self._file["case"], key, value)

    def commit(self) -> str:
        """Closes the file and, for a new report, renames it into place."""
        self._file.close()
        if self._final is not None:
            os.replace(self.path, self._final)
            self.path = self._final
        return self.path

    def abort(self) -> None:
        """Closes the file; a new report's temporary file is removed."""
        try:
            self._file.close()
        finally:
            if self._final is not None and os.path.exists(self.path):
                os.unlink(self.path)

    def __enter__(self) -> "Recorder":
        return self

    def __exit__(self, kind, value, tb):
        if kind is not None:
            self.abort()
        elif self._file.id.valid:
            self.commit()
        return False
