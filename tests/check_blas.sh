#!/usr/bin/env bash
# check_blas.sh CV OUT PYTHON: a run names the BLAS it really computes with.
# The expectation comes from outside the harness: the libtorch_cpu.so that
# ldd (the dynamic loader) resolves for the binary, `nm -D` saying that it
# defines sgemm_ itself, and the MKL release that torch's own build
# configuration (torch.__config__.show(), the same torch) reports. It must
# be the one named by --version, by the report's root attributes `blas` and
# `blas_library`, and by summary.json; no warning is given for it.
set -u
cv=$1 out=$2 py=$3
fail() { echo "check_blas: $*" >&2; exit 1; }

dir=$out/default
rm -rf "$dir"; mkdir -p "$dir"
lib=$(ldd "$cv" | awk '$1 == "libtorch_cpu.so" { print $3 }')
[ -n "$lib" ] || fail "ldd finds no libtorch_cpu.so for $cv"
lib=$(realpath "$lib")
echo "the loader resolves libtorch_cpu.so to $lib"
nm -D --defined-only "$lib" | grep -qw sgemm_ || fail "$lib does not define sgemm_ (not the wheel's MKL build?)"
release=$("$py" -c '
import re, torch
m = re.search(r"Math Kernel Library Version ([0-9.]+)", torch.__config__.show())
print(m.group(1) if m else "")')
[ -n "$release" ] || fail "torch.__config__.show() names no MKL release"
want="Intel MKL $release (in libtorch_cpu.so)"
echo "torch's build configuration: MKL $release; expected name: $want"
version=$("$cv" --version) || fail "--version failed"
echo "$version"
grep -qxF -- "BLAS $want: $lib" <<<"$version" || fail "--version does not name '$want: $lib'"
"$cv" --case bias_gelu_bs1 --impl nonreentrant --steps 1 --out "$dir" >"$dir/stdout" 2>"$dir/stderr" \
  || { cat "$dir/stdout" "$dir/stderr"; fail "the run failed"; }
"$py" - "$dir/bias_gelu_bs1.h5" "$dir/summary.json" "$lib" "$want" <<'PY' || fail "report attributes"
import h5py, json, sys
h5, summary, lib, want = sys.argv[1:]
a = h5py.File(h5, "r").attrs
name, path = a["blas"].decode(), a["blas_library"].decode()
print(f"report: blas = {name!r}, blas_library = {path!r}")
assert path == lib, f"blas_library {path!r} is not the loaded {lib!r}"
assert name == want, f"blas {name!r} is not {want!r}"
s = json.load(open(summary))
assert s["blas"] == name, f"summary.json blas {s['blas']!r} != {name!r}"
PY
grep -q "BLAS" "$dir/stderr" && fail "a BLAS warning where MKL is loaded: $(cat "$dir/stderr")"
echo "check_blas: ok"
