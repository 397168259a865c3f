"""The one recorder: every frontend (eager user models, the torch twin of
the harness's models, ...) hands it finished runs, and it streams them into
a schema-1 report (docs/schema.md).

A RunRecord is what a frontend produces: a run name, its tensors ({schema
path under /runs/<name>: tensor}) and its attributes ({"memory.peak_bytes":
number, ...}). A Recorder writes the file's head (root attributes, /case,
/inputs, /params_init) when it opens and each run as it is added, so a run's
tensors need not outlive it. A new report is written under a temporary name
and renamed into place by commit(): a failure, or leaving the `with` block
by an exception, leaves any previous file at the path untouched. Appending
to an existing report (Recorder.append) writes in place and refuses a run
name the file already has, before writing anything."""
import os
import time

import h5py

from .errors import BadInput
from .schema import SCHEMA_VERSION, set_attr, write_attrs, write_tensor


class RunRecord:
    """One run's results, as a frontend hands them to the recorder."""

    def __init__(self, name: str):
        self.name = name
        self.tensors: dict = {}  # "steps/1/loss" -> cpu tensor, in the order written
        self.attrs: dict = {}    # "timing.forward_ms" -> number or string


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

    def add(self, run: RunRecord, extra_attrs: dict | None = None) -> None:
        """Writes /runs/<name>: its tensors, then its attributes."""
        if self.has_run(run.name):
            raise BadInput(f"{self._final or self.path}: /runs/{run.name} exists already")
        g = self._file.create_group(f"runs/{run.name}", track_order=True)
        try:
            for key, t in run.tensors.items():
                write_tensor(g, key, t)
            write_attrs(g, run.attrs)
            for key, value in (extra_attrs or {}).items():
                set_attr(g, key, value)
        except BaseException:
            del self._file[f"runs/{run.name}"]  # no half-written run is left behind
            raise

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
