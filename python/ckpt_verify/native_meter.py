"""The counting CPU allocator built against the torch this process runs.

The byte accounting of a CPU run comes from the harness's counting
allocator (harness/aten/counting_allocator.cpp), which must link the very
libc10 that Python imported: c10 has one CPU allocator slot per process.
A project build's libckpt_aten.so links the project's pinned torch; in a
user's own environment (their torch 2.x, a pip-installed ckpt_verify) this
module compiles the same source against their torch at first use and keeps
the library in a cache keyed by that torch, so every later run loads it at
once.

Contract:
- `build_meter()` returns the path of a shared library exporting the
  counting allocator's C symbols (counting_allocator.h), linked against
  the libc10 of the imported torch; it raises MeterUnavailable with one
  line saying what is missing (the C++ compiler, torch's headers) and how
  to fix it.
- The build is exact, not an estimate: the same source as the harness's
  own library, so the figures match it byte for byte on the pinned torch
  (tests/python/test_native_meter.py).
- Concurrent first uses (several CI jobs) build once: a lock file guards
  the cache entry, and the library is written under a temporary name and
  renamed.
"""
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile

import torch

_HERE = os.path.dirname(os.path.abspath(__file__))
# The sources: beside the package in a wheel (cmake/install_wheel.cmake),
# in the source tree otherwise.
_SOURCE_DIRS = (
    os.path.join(_HERE, "native"),
    os.path.normpath(os.path.join(_HERE, "..", "..", "harness")),
)
_FILES = ("counting_allocator.cpp", "counting_allocator.h", "memory_limit.c", "memory_limit.h")


class MeterUnavailable(RuntimeError):
    """The counting allocator cannot be built here; the message says why."""


def _sources() -> dict[str, str]:
    """{file name: path} of the allocator's sources, from the first place
    that has them all."""
    for root in _SOURCE_DIRS:
        found = {}
        for name in _FILES:
            for sub in ("", "aten"):
                path = os.path.join(root, sub, name)
                if os.path.isfile(path):
                    found[name] = path
                    break
        if len(found) == len(_FILES):
            return found
    raise MeterUnavailable("the counting allocator's sources are not installed with ckpt_verify "
                           f"(looked in {', '.join(_SOURCE_DIRS)}); reinstall it with pip")


def cache_dir() -> str:
    """$CKPT_VERIFY_CACHE, else $XDG_CACHE_HOME/ckpt-verify, else
    ~/.cache/ckpt-verify: where built meters are kept."""
    env = os.environ.get("CKPT_VERIFY_CACHE")
    if env:
        return env
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "ckpt-verify")


def _compiler() -> str:
    for candidate in (os.environ.get("CXX"), "c++", "g++", "clang++"):
        if candidate and shutil.which(candidate):
            return candidate
    raise MeterUnavailable("CPU memory cannot be measured: no C++ compiler (set CXX, or install one: "
                           "Debian's g++) to build the counting allocator against this torch")


def _torch_paths() -> tuple[list[str], str]:
    """(include dirs, lib dir) of the imported torch."""
    root = os.path.dirname(torch.__file__)
    include, lib = os.path.join(root, "include"), os.path.join(root, "lib")
    headers = os.path.join(include, "c10", "core", "CPUAllocator.h")
    if not os.path.isfile(headers):
        raise MeterUnavailable(f"CPU memory cannot be measured: torch {torch.__version__} at {root} ships no "
                               "C++ headers (include/c10); install a torch wheel from PyPI")
    return [include, os.path.join(include, "torch", "csrc", "api", "include")], lib


def _key(sources: dict[str, str], lib: str) -> str:
    h = hashlib.sha256()
    h.update(torch.__version__.encode())
    h.update(os.path.realpath(lib).encode())
    h.update(str(int(torch._C._GLIBCXX_USE_CXX11_ABI)).encode())
    for name in _FILES:
        with open(sources[name], "rb") as f:
            h.update(f.read())
    return h.hexdigest()[:16]


def build_meter() -> str:
    """The path of the counting allocator built against this torch (built
    now when the cache has none)."""
    sources = _sources()
    include, lib = _torch_paths()
    entry = os.path.join(cache_dir(), "meter", f"torch-{torch.__version__.replace('+', '_')}-{_key(sources, lib)}")
    target = os.path.join(entry, "libckpt_meter.so")
    if os.path.isfile(target):
        return target
    try:
        os.makedirs(entry, exist_ok=True)
    except OSError as e:
        raise MeterUnavailable(f"CPU memory cannot be measured: cannot create {entry} ({e.strerror}); "
                               "set CKPT_VERIFY_CACHE to a writable folder") from e
    with open(os.path.join(entry, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be building it now
        if os.path.isfile(target):
            return target
        cxx = _compiler()
        fd, tmp = tempfile.mkstemp(prefix=".libckpt_meter.", suffix=".so", dir=entry)
        os.close(fd)
        abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)
        # memory_limit.c is C: compiled as such (with the C++ compiler in C
        # mode when there is no C compiler), then linked with the .cpp.
        obj = tmp + ".memory_limit.o"
        cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
        cmds = [([cc] if cc else [cxx, "-x", "c"]) + ["-O2", "-fPIC", "-std=c11", "-D_POSIX_C_SOURCE=200809L", "-c",
                                                     sources["memory_limit.c"], "-o", obj],
                [cxx, "-O2", "-fPIC", "-shared", "-std=c++17", f"-D_GLIBCXX_USE_CXX11_ABI={abi}",
                 f"-I{os.path.dirname(sources['memory_limit.h'])}",
                 f"-I{os.path.dirname(sources['counting_allocator.h'])}",
                 *[f"-I{d}" for d in include], sources["counting_allocator.cpp"], obj, "-o", tmp,
                 f"-L{lib}", "-lc10", f"-Wl,-rpath,{lib}"]]
        if sys.stderr.isatty():
            print(f"ckpt_verify: building the counting allocator for torch {torch.__version__} (once; cached in "
                  f"{entry})", file=sys.stderr)
        try:
            for cmd in cmds:
                p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
                if p.returncode != 0:
                    last = (p.stdout.strip().splitlines() or ["(no output)"])[-1]
                    raise MeterUnavailable(f"CPU memory cannot be measured: building the counting allocator against "
                                           f"torch {torch.__version__} failed ({os.path.basename(cmd[0])}: {last})")
            os.replace(tmp, target)
        except subprocess.TimeoutExpired as e:
            raise MeterUnavailable("CPU memory cannot be measured: building the counting allocator took over "
                                   "300 s") from e
        finally:
            for leftover in (tmp, obj):
                if os.path.exists(leftover):
                    os.unlink(leftover)
    return target
