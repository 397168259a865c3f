"""The counting allocator built against the running torch at first use
(ckpt_verify.native_meter) measures what the harness's own libckpt_aten.so
measures, byte for byte, on the pinned torch; it is built once per torch and
cached; and when it cannot be built, the run's memory says why in one line.
Each measurement runs in a child process: c10 has one CPU allocator slot per
process."""
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.join(HERE, "..", "..", "python")
sys.path.insert(0, PYTHON_DIR)

# Allocations with sizes known in advance: live and peak bytes after each
# step must be these exact numbers (the expectation is arithmetic, not the
# meter's own output).
SCRIPT = r"""
import ctypes, json, sys
import torch
lib = ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)
lib.ckpt_counting_allocator_stats.argtypes = [ctypes.POINTER(ctypes.c_int64)] * 3
assert lib.ckpt_install_counting_allocator() == 0
def stats():
    live, peak = ctypes.c_int64(), ctypes.c_int64()
    lib.ckpt_counting_allocator_stats(ctypes.byref(live), ctypes.byref(peak), None)
    return live.value, peak.value
start, _ = stats()
lib.ckpt_counting_allocator_reset_peak()
out = []
a = torch.empty(1000, dtype=torch.float32)
out.append([v - start for v in stats()])
b = torch.empty(250, 4, dtype=torch.float64)
out.append([v - start for v in stats()])
del a
out.append([v - start for v in stats()])
c = torch.ones(3, 5, dtype=torch.bfloat16) * 2
out.append([v - start for v in stats()])
del b, c
out.append([v - start for v in stats()])
print(json.dumps(out))
"""


def measure(lib: str) -> list:
    p = subprocess.run([sys.executable, "-c", SCRIPT, lib], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    import json
    return json.loads(p.stdout)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> str:
    """The meter, built into a cache of this module's own (the setting is
    restored afterwards: other tests share this process)."""
    from ckpt_verify import native_meter
    before = os.environ.get("CKPT_VERIFY_CACHE")
    os.environ["CKPT_VERIFY_CACHE"] = str(tmp_path_factory.mktemp("cache"))
    try:
        yield native_meter.build_meter()
    finally:
        if before is None:
            os.environ.pop("CKPT_VERIFY_CACHE", None)
        else:
            os.environ["CKPT_VERIFY_CACHE"] = before


def test_the_built_meter_counts_exact_bytes(built):
    # float32 x1000 = 4000 B; float64 250x4 = 8000 B; bf16 3x5 = 30 B, and
    # `ones * 2` holds a temporary of 30 B at its peak.
    assert measure(built) == [[4000, 4000], [12000, 12000], [8000, 12000], [8030, 12000], [0, 12000]]


# A storage's allocation serial (ckpt_counting_allocator_serial): what the
# memory map names CPU storages by. Addresses are reused by malloc; the
# serial says which allocation lives there now, and none is given twice.
SERIAL_SCRIPT = r"""
import ctypes, json, sys
import torch
lib = ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)
lib.ckpt_counting_allocator_serial.argtypes = [ctypes.c_void_p]
lib.ckpt_counting_allocator_serial.restype = ctypes.c_uint64
assert lib.ckpt_install_counting_allocator() == 0
serial = lambda ptr: lib.ckpt_counting_allocator_serial(ptr)
out = {}
a = torch.empty(1 << 16)
ptr = a.untyped_storage().data_ptr()
first = serial(ptr)
out["live"] = first > 0
out["a_view_names_the_same_allocation"] = serial(a[100:].untyped_storage().data_ptr()) == first
out["inside_is_not_a_start"] = serial(ptr + 64) == 0
del a
out["freed"] = serial(ptr)
# Wherever malloc puts the next allocation (the freed address or another),
# its serial is a new one: (address, serial) never names two storages.
b = torch.empty(1 << 16)
out["next_serial_is_new"] = serial(b.untyped_storage().data_ptr()) > first
print(json.dumps(out))
"""


def test_an_allocation_serial_names_one_storage_and_ends_with_it(built):
    p = subprocess.run([sys.executable, "-c", SERIAL_SCRIPT, built], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    import json
    assert json.loads(p.stdout) == {"live": True, "a_view_names_the_same_allocation": True,
                                    "inside_is_not_a_start": True, "freed": 0,
                                    "next_serial_is_new": True}


def test_the_built_meter_equals_the_harness_library_on_the_pinned_torch(built):
    aten = os.environ.get("CKPT_ATEN_LIB")
    if not aten or not os.path.isfile(aten):
        pytest.skip("no libckpt_aten.so of a project build (CKPT_ATEN_LIB) to compare with")
    assert measure(built) == measure(aten)


def test_the_meter_is_built_once_per_torch(built):
    from ckpt_verify import native_meter
    before = os.stat(built).st_mtime_ns
    assert native_meter.build_meter() == built
    assert os.stat(built).st_mtime_ns == before


def test_a_meter_that_cannot_be_built_says_why_in_one_line(tmp_path):
    failing = tmp_path / "cxx"
    failing.write_text("#!/bin/sh\necho 'fatal error: c10/core/CPUAllocator.h: No such file' >&2\nexit 1\n")
    failing.chmod(0o755)
    env = dict(os.environ, CKPT_VERIFY_CACHE=str(tmp_path / "cache"), CXX=str(failing), CC=str(failing),
               PYTHONPATH=PYTHON_DIR)
    code = ("from ckpt_verify import native_meter\n"
            "try:\n    native_meter.build_meter()\n"
            "except native_meter.MeterUnavailable as e:\n    print(e)\n")
    p = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       env=env, timeout=300)
    line = p.stdout.strip()
    assert "\n" not in line
    assert line.startswith("CPU memory cannot be measured: building the counting allocator against torch ")
    assert "No such file" in line
    assert not list((tmp_path / "cache").rglob("*.so")), "a failed build must leave no library behind"
