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
without keeping anything, whether the run was (RunWriter.identical). A
re-run ("<run>_rerun_<k>") links the tensors it repeats bitwise from its run
as well, so re-runs of a deterministic FAIL add almost no bytes either.

A new report is written under a temporary name of its own
("<path>.XXXXXXXX.tmp", made by tempfile in the report's directory, so two
recorders writing to one path never open one file) and renamed into place
by commit(): a failure, or leaving the `with` block by an exception, removes
the temporary and leaves any previous file at the path untouched. Appending
to an existing report (Recorder.append) writes in place and refuses a run
name the file already has, before writing anything.

Room on disk is reserved before each write, as the C writer does
(harness/storage/disk_room.c): HDF5 cannot recover from a write that fails
on a full disk (it reports "Disable slist on flush dest failure failed ...
errno = 28" and leaves the file half-closed). Before a dataset is written,
the file's end plus the data plus a margin for HDF5's metadata (256 KiB and
1/64 of the file) must fit under the file size limit (RLIMIT_FSIZE) and be
reserved on disk (fallocate without changing the size; where the file
system has no fallocate, the free space statvfs reports must hold it). A
report that does not fit, and a directory it cannot be created in, is
ReportNotWritable (a BadInput) with one line naming the file and the
reason; nothing is left behind."""
import ctypes
import errno
import os
import resource
import tempfile
import time
from typing import TYPE_CHECKING

import h5py
import numpy as np

from .errors import BadInput, ModelNotReproducible, ReportNotWritable
from .schema import SCHEMA_VERSION, attr_text, checksum, host_array, set_attr, write_array, write_attrs

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


# Metadata HDF5 may still write after the last data (object headers,
# B-trees, heaps at flush), kept free beyond every reservation: a fixed
# part and a part proportional to the file (harness/storage/disk_room.h).
ROOM_MARGIN_BYTES = 256 << 10
ROOM_MARGIN_SHARE = 64
_FALLOC_FL_KEEP_SIZE, _FALLOC_FL_PUNCH_HOLE = 0x01, 0x02


def _libc_fallocate():
    try:
        fn = ctypes.CDLL(None, use_errno=True).fallocate
    except (OSError, AttributeError):
        return None
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong]
    return fn


_FALLOCATE = _libc_fallocate()  # Linux's fallocate(2), or None


def _size_limit() -> int | None:
    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    return None if soft == resource.RLIM_INFINITY else soft


class DiskRoom:
    """Room on disk reserved for a file before HDF5 writes into it
    (harness/storage/disk_room.c, the same rule): ensure(end) makes sure the
    file can grow to `end` bytes plus the margin, or raises
    ReportNotWritable while nothing has been handed to HDF5. Reserves in
    steps of at least 1/8 of the file, so many small writes cost few system
    calls; release() gives back what was reserved past the file's end."""

    def __init__(self, fd: int, name: str):
        self.fd, self.name, self.reserved = fd, name, 0
        self.size_limit = _size_limit()

    def _refuse(self, code: int, need: int) -> ReportNotWritable:
        return ReportNotWritable(f"{self.name}: cannot write the report: {os.strerror(code)} (room for {need} bytes "
                                 f"is reserved before each write, HDF5's metadata included; nothing is left "
                                 f"behind)")

    def ensure(self, end: int) -> None:
        need = end + ROOM_MARGIN_BYTES + end // ROOM_MARGIN_SHARE
        if self.size_limit is not None and need > self.size_limit:
            raise self._refuse(errno.EFBIG, need)
        if need <= self.reserved:
            return
        target = need + need // 8
        if self.size_limit is not None:
            target = min(target, self.size_limit)
        code = errno.EOPNOTSUPP
        if _FALLOCATE is not None:
            code = 0 if _FALLOCATE(self.fd, _FALLOC_FL_KEEP_SIZE, 0, target) == 0 else ctypes.get_errno()
        if code in (errno.EOPNOTSUPP, errno.ENOSYS):
            # No reservation here: the free space must at least hold it now.
            vfs, size = os.fstatvfs(self.fd), os.fstat(self.fd).st_size
            if size + vfs.f_bavail * vfs.f_frsize < need:
                raise self._refuse(errno.ENOSPC, need)
        elif code:
            raise self._refuse(code, need)
        self.reserved = target

    def release(self) -> None:
        """Punching past the end frees what KEEP_SIZE reserved; a file system
        without it keeps the blocks until the file is removed."""
        size = os.fstat(self.fd).st_size
        if _FALLOCATE is not None and self.reserved > size:
            _FALLOCATE(self.fd, _FALLOC_FL_PUNCH_HOLE | _FALLOC_FL_KEEP_SIZE, size, self.reserved - size)
        self.reserved = 0


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
        # A re-run ("<run>_rerun_<k>") of a run that differs from its
        # reference mostly repeats that run bitwise (a deterministic bug):
        # its tensors equal to the run's are links to the run's datasets.
        own = name.rsplit("_rerun_", 1)[0] if "_rerun_" in name else None
        self._own = f[f"runs/{own}"] if own and f"runs/{own}" in f else None
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
        # Once a run has differed from its reference, its later tensors
        # mostly differ too (a bug's divergence spreads): their checksum,
        # which a new dataset needs anyway, is compared with the
        # reference's stored one first, and the reference is read back
        # only when the two agree.
        crc = checksum(data) if self._differs and isinstance(ref, h5py.Dataset) else None
        if isinstance(ref, h5py.Dataset) and self._same(ref, data, kind, crc):
            self._link(path, ref, data)
            return
        if not fact:
            self._differs = True
        own = self._own.get(path) if self._own is not None else None
        if isinstance(own, h5py.Dataset) and self._same(own, data, kind, crc):
            self._link(path, own, data)  # the re-run repeats its run here: not the reference, so it differs
            return
        self._recorder.write(self._group, path, data, kind, crc)
        self.new_bytes += data.nbytes

    def _link(self, path: str, target: h5py.Dataset, data: np.ndarray) -> None:
        self._recorder.reserve(0)  # a link adds metadata only: the margin
        self._group[path] = target  # a hard link: h5py and h5dump read it as a dataset
        self.linked_bytes += data.nbytes

    @staticmethod
    def _same(ref: h5py.Dataset, data: np.ndarray, kind: str, crc: int | None = None) -> bool:
        """dtype, schema dtype, shape and bytes equal. The bytes are
        compared directly (the reference read back, one tensor; memcmp):
        most runs pass, and for them a checksum first would only add its
        own pass over the data. With `crc` (data's checksum, already
        taken), a stored crc32 that differs answers without the read."""
        if ref.shape != data.shape or ref.dtype != data.dtype:
            return False
        if attr_text(ref.attrs.get("dtype", "")).split(".")[-1] != kind:
            return False
        if crc is not None:
            stored = ref.attrs.get("crc32")
            if stored is not None and int(stored) != crc:
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
            self._recorder.reserve(0)
            write_attrs(self._group, self.attrs)
            for key, value in (extra_attrs or {}).items():
                set_attr(self._group, key, value)
        except BaseException:
            self.abort()
            raise
        self.open = False

    def abort(self) -> None:
        """Removes the run from the file: no half-written run is left. After
        a write HDF5 refused, the file is not touched again: the recorder
        removes all of it."""
        if self.open:
            self.open = False
            if not self._recorder.broken:
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


def _hdf5_failure(path: str, e: BaseException) -> ReportNotWritable:
    """One line for a write HDF5 refused in spite of the reservation (an I/O
    error, a file system that lied about its room): its errno's words where
    HDF5 gives one, else the last line of its error stack."""
    code = getattr(e, "errno", None)
    text = os.strerror(code) if code else str(e).strip().split("\n")[-1]
    return ReportNotWritable(f"{path}: cannot write the report: {text}; nothing is left behind")


class Recorder:
    """Streams runs into one report; use as a context manager."""

    def __init__(self, path: str, file: h5py.File, final_path: str | None, fd: int | None = None):
        self.path, self._file, self._final = path, file, final_path
        self._fd = fd
        self._room = DiskRoom(fd, final_path or path) if fd is not None else None
        self.broken = False  # a write failed inside HDF5: the file is only closed and removed

    def reserve(self, nbytes: int) -> None:
        """Room for `nbytes` more data past the file's end (plus the margin
        for metadata), before they are handed to HDF5; ReportNotWritable
        when there is none."""
        if self._room is not None:
            self._room.ensure(self._file.id.get_filesize() + nbytes)

    def write(self, group: h5py.Group, path: str, data: np.ndarray, kind: str, crc: int | None = None) -> None:
        """A new dataset (schema.write_array), its room reserved first; a
        write that HDF5 refuses anyway is ReportNotWritable, in one line.
        crc: data's checksum, when the caller has it already."""
        self.reserve(data.nbytes)
        try:
            write_array(group, path, data, kind, crc)
        except (OSError, RuntimeError) as e:
            self.broken = True
            raise _hdf5_failure(self._final or self.path, e) from e

    @classmethod
    def create(cls, path: str, root_attrs: dict, case_attrs: dict | None = None, inputs: dict | None = None,
               params_init: dict | None = None, copy_from: h5py.File | None = None) -> "Recorder":
        """A new report at `path` (written as path.XXXXXXXX.tmp, a name of its
        own, until commit()). /case, /inputs and /params_init come from the
        arguments, or are copied whole from `copy_from` (a report whose case
        is re-run). A directory the file cannot be made in, or a disk
        without room, is ReportNotWritable; no temporary is left."""
        directory, base = os.path.split(os.path.abspath(path))
        try:
            fd, tmp = tempfile.mkstemp(prefix=f"{base}.", suffix=".tmp", dir=directory)
        except OSError as e:
            raise ReportNotWritable(f"{path}: cannot write the report: cannot create a file in {directory}: "
                                    f"{e.strerror}") from None
        rec = None
        try:
            umask = os.umask(0)
            os.umask(umask)
            os.fchmod(fd, 0o666 & ~umask)  # a report is an ordinary file, not mkstemp's 0600
            try:
                f = h5py.File(tmp, "w", track_order=True)
            except OSError as e:
                raise _hdf5_failure(path, e) from e
            rec = cls(tmp, f, path, fd)
            rec.reserve(0)
            set_attr(f, "schema_version", SCHEMA_VERSION)
            for key, value in root_attrs.items():
                set_attr(f, key, value)
            set_attr(f, "created_utc", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
            if copy_from is not None:
                for name in ("case", "inputs", "params_init"):
                    rec.reserve(_stored_bytes(copy_from[name]))
                    copy_from.copy(copy_from[name], f, name=name)
            else:
                case = f.create_group("case", track_order=True)
                for key, value in (case_attrs or {}).items():
                    set_attr(case, key, value)
                for key, t in (inputs or {}).items():
                    rec.write(f, f"inputs/{key}", *host_array(t))
                for key, t in (params_init or {}).items():
                    rec.write(f, f"params_init/{key}", *host_array(t))
        except BaseException:
            if rec is not None:
                rec.abort()
            else:
                os.close(fd)
                os.unlink(tmp)
            raise
        return rec

    @classmethod
    def append(cls, path: str) -> "Recorder":
        """An existing report, to which runs are added in place (room
        reserved before each write as for a new one)."""
        try:
            fd = os.open(path, os.O_RDWR)
        except OSError as e:
            raise BadInput(f"{path}: cannot open the report for appending ({e.strerror})") from e
        try:
            f = h5py.File(path, "r+")
        except OSError as e:
            os.close(fd)
            raise BadInput(f"{path}: cannot open the report for appending ({e})") from e
        return cls(path, f, None, fd)

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
        self.reserve(0)
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
        self.reserve(0)
        set_attr(self._file["case"], key, value)

    def _close_fd(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)

    def commit(self) -> str:
        """Closes the file and, for a new report, renames it into place. A
        close that HDF5 fails (its last metadata did not fit after all) is
        ReportNotWritable, and the temporary is removed."""
        self.reserve(0)
        try:
            self._file.close()
        except (OSError, RuntimeError) as e:
            self.broken = True
            self.abort()
            raise _hdf5_failure(self._final or self.path, e) from e
        try:
            if self._room is not None:
                self._room.release()
        finally:
            self._close_fd()
        if self._final is not None:
            os.replace(self.path, self._final)
            self.path = self._final
        return self.path

    def abort(self) -> None:
        """Closes the file; a new report's temporary file is removed (also
        when HDF5 cannot close it cleanly)."""
        try:
            if self._file.id.valid:
                self._file.close()
        except (OSError, RuntimeError):
            pass  # the file goes anyway
        finally:
            self._close_fd()
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


def _stored_bytes(obj: h5py.HLObject) -> int:
    """Bytes of the datasets in a group (or of one dataset)."""
    if isinstance(obj, h5py.Dataset):
        return obj.id.get_storage_size()
    sizes: list = []
    obj.visititems(lambda _, o: sizes.append(o.id.get_storage_size()) if isinstance(o, h5py.Dataset) else None)
    return sum(sizes)


def check_same_tensors(recorder: "Recorder", first: str, other: str) -> None:
    """Two plain baselines, trained from the same seed with every generator
    seeded, must record the same tensors (which gradients, buffers and
    steps exist); otherwise every run would be judged FAIL for what the
    model does by itself. ModelNotReproducible names the first tensor only
    one of them recorded."""
    f = recorder.file
    a, b = result_paths(f[f"runs/{first}"]), result_paths(f[f"runs/{other}"])
    in_a, in_b = set(a), set(b)
    only_a = [p for p in a if p not in in_b]
    only_b = [p for p in b if p not in in_a]
    if only_a or only_b:
        path, has, lacks = (only_a[0], first, other) if only_a else (only_b[0], other, first)
        more = len(only_a) + len(only_b) - 1
        raise ModelNotReproducible(
            f"the plain baseline is not reproducible: {path} is recorded by {has} but not by {lacks}"
            f"{f' (and {more} more tensor(s) differ)' if more else ''}, although both trained from seed "
            f"{recorder.file['case'].attrs.get('seed', '?')} with torch's, Python's random and numpy's global "
            f"generators seeded; the model must choose what it computes from nothing but the seed (no "
            f"random.Random() or np.random.default_rng() of its own, no clock, no counter kept across runs)")


def link_run(recorder: "Recorder", source: str, name: str, drop_ranks: bool, extra: dict | None = None) -> None:
    """/runs/<name> made of hard links to /runs/<source>'s datasets (no copy;
    h5py and the judge read them as the run's own), ranks/ left out, and
    its attributes copied. checks/step_start_bytes is left out too: live
    bytes of a rank and of a single process grow differently by nature, and
    each run's leak check is made against its own family."""
    f = recorder.file
    src = f[f"runs/{source}"]
    dst = f.create_group(f"runs/{name}", track_order=True)
    paths = []
    src.visit(paths.append)
    for path in paths:
        if drop_ranks and (path == "ranks" or path.startswith("ranks/") or path == "checks/step_start_bytes"):
            continue
        obj = src[path]
        if isinstance(obj, h5py.Group):
            _copy_attrs(obj, dst.require_group(path))
        else:
            dst[path] = obj  # a hard link to the same dataset
    _copy_attrs(src, dst, skip=("baselines",))
    set_attr(dst, "linked_from", source)
    for key, value in (extra or {}).items():
        set_attr(dst, key, value)


def _copy_attrs(src, dst, skip=()):
    for key, value in src.attrs.items():
        if key in skip:
            continue
        if isinstance(value, (bytes, str)):
            set_attr(dst, key, attr_text(value))
        else:
            dst.attrs.create(key, value, dtype=src.attrs.get_id(key).dtype)
