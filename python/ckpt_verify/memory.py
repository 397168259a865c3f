"""Byte meters for a run: the caching allocator's statistics on CUDA (any
torch), the harness's counting CPU allocator on the CPU (a project build's
libckpt_aten.so when it links this torch, else the same allocator built
against this torch at first use, native_meter.py), or nothing, with the
reason, when neither is available.

A meter answers live bytes, the peak since its last reset, and waits for
the device so that a reading covers the work queued before it."""
import ctypes
import os
import subprocess

import torch

from . import native_meter

# Where the library is looked for, in order: $CKPT_ATEN_LIB, next to the
# judge binary, the tree's build/ (python/ckpt_verify/../../build).
_TREE_BUILD = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "..", "build"))


class CudaMeter:
    def __init__(self, device):
        self.device = torch.device(device)
        self.source = "cuda caching allocator (memory_allocated / max_memory_allocated)"

    def sync(self):
        torch.cuda.synchronize(self.device)

    def live(self):
        return torch.cuda.memory_allocated(self.device)

    def peak(self):
        return torch.cuda.max_memory_allocated(self.device)

    def reset_peak(self):
        torch.cuda.reset_peak_memory_stats(self.device)


class CountingMeter:
    """The harness's counting allocator, installed into this process's c10.
    Installing late is fine for what is measured: tensors made before it
    are freed by their own deleter and never enter its counts, and every
    reading is a difference from the live bytes when a step began."""

    def __init__(self, lib, path):
        self.lib = lib
        self.source = f"counting CPU allocator ({os.path.basename(path)})"

    def sync(self):
        pass

    def _stats(self):
        live, peak = ctypes.c_int64(), ctypes.c_int64()
        self.lib.ckpt_counting_allocator_stats(ctypes.byref(live), ctypes.byref(peak), None)
        return live.value, peak.value

    def live(self):
        return self._stats()[0]

    def peak(self):
        return self._stats()[1]

    def reset_peak(self):
        self.lib.ckpt_counting_allocator_reset_peak()

    def allocation_serial(self, ptr: int) -> int:
        """The serial number of the live allocation at data pointer `ptr`,
        0 when none of this allocator's starts there (never reused while
        the process lives: (ptr, serial) names one storage)."""
        return self.lib.ckpt_counting_allocator_serial(ptr)


class NoMeter:
    def __init__(self, why):
        self.source = None
        self.why = why

    def sync(self):
        pass


def _loaded_c10():
    """Real paths of the libc10 copies mapped into this process."""
    paths = set()
    with open("/proc/self/maps") as maps:
        for line in maps:
            parts = line.split()
            if len(parts) >= 6 and os.path.basename(parts[-1]).startswith("libc10.so"):
                paths.add(os.path.realpath(parts[-1]))
    return paths


def _linked_c10(lib_path):
    """The libc10 the library would load, resolved by ldd (in a child
    process, so a mismatched library is never mapped into this one)."""
    try:
        out = subprocess.run(["ldd", lib_path], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for line in out.splitlines():
        parts = line.split()
        if parts and parts[0].startswith("libc10.so") and "=>" in parts and len(parts) >= 3:
            return os.path.realpath(parts[2])
    return None


def aten_library_candidates(judge_path=None):
    env = os.environ.get("CKPT_ATEN_LIB")
    if env:
        return [env]
    found = []
    if judge_path:
        found.append(os.path.join(os.path.dirname(os.path.realpath(judge_path)), "libckpt_aten.so"))
    found.append(os.path.join(_TREE_BUILD, "libckpt_aten.so"))
    return found


_counting = {}  # path -> CountingMeter: c10 has one CPU allocator slot per process


def _install(path):
    """A CountingMeter over the library at path, or the reason it is none."""
    if path in _counting:
        return _counting[path], None
    lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    lib.ckpt_install_counting_allocator.restype = ctypes.c_int
    lib.ckpt_counting_allocator_installed.restype = ctypes.c_int
    lib.ckpt_counting_allocator_stats.argtypes = [ctypes.POINTER(ctypes.c_int64)] * 3
    lib.ckpt_counting_allocator_serial.argtypes = [ctypes.c_void_p]
    lib.ckpt_counting_allocator_serial.restype = ctypes.c_uint64
    if lib.ckpt_install_counting_allocator() != 0 or not lib.ckpt_counting_allocator_installed():
        return None, f"{path}: could not install the counting allocator"
    _counting[path] = CountingMeter(lib, path)
    return _counting[path], None


def cpu_meter(judge_path=None):
    """The counting allocator linked against this process's libtorch: a
    project build's libckpt_aten.so when it is (the pinned torch), else the
    same allocator built against this torch at first use (native_meter.py:
    the user's own torch); a NoMeter saying why when neither can be had."""
    torch.empty(0)  # make sure torch's libraries are mapped before comparing
    tried = []
    for path in aten_library_candidates(judge_path):
        if not os.path.isfile(path):
            tried.append(f"{path}: not found")
            continue
        if path not in _counting:
            linked, loaded = _linked_c10(path), _loaded_c10()
            if linked is None or linked not in loaded:
                tried.append(f"{path}: built against another libtorch ({linked or 'unknown libc10'}; "
                             f"torch here uses {', '.join(sorted(loaded)) or 'unknown'})")
                continue
        meter, why = _install(path)
        if meter:
            return meter
        tried.append(why)
    try:
        built = native_meter.build_meter()
    except native_meter.MeterUnavailable as e:
        return NoMeter(f"{e} (also tried: {'; '.join(tried)})" if tried else str(e))
    meter, why = _install(built)
    return meter or NoMeter(f"CPU memory cannot be measured: {why}")


def meter_for(device, judge_path=None):
    if torch.device(device).type == "cuda":
        return CudaMeter(device)
    if torch.device(device).type == "cpu":
        return cpu_meter(judge_path)
    return NoMeter(f"memory not recorded: no meter for device {device}")


def parse_bytes(text: str) -> int | None:
    """"1048576", "512M", "8G" (powers of 1024) as bytes, as the harness
    reads CKPT_MEMORY_LIMIT (harness/aten/counting_allocator.cpp); None
    when it is not one."""
    text = text.strip()
    shift = {"k": 10, "m": 20, "g": 30, "t": 40}.get(text[-1:].lower(), 0)
    digits = text[:-1] if shift else text
    if not digits.isdigit() or int(digits) == 0:
        return None
    return int(digits) << shift


def available_bytes() -> int | None:
    """MemAvailable from /proc/meminfo, None when unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def memory_limit() -> tuple[int | None, str]:
    """(bytes, what they are) that a verify() may use on the host:
    CKPT_MEMORY_LIMIT when set, else what the system has available now
    (MemAvailable); (None, why) when neither is known. A malformed
    CKPT_MEMORY_LIMIT is bad input (ValueError with the line to show)."""
    env = os.environ.get("CKPT_MEMORY_LIMIT")
    if env is not None:
        limit = parse_bytes(env)
        if limit is None:
            raise ValueError(f"CKPT_MEMORY_LIMIT={env!r}: not a byte count (for example 512M or 8G)")
        return limit, "CKPT_MEMORY_LIMIT"
    avail = available_bytes()
    return (avail, "available (MemAvailable in /proc/meminfo)") if avail is not None else (None, "no limit known")
