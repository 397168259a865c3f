#!/usr/bin/env bash
# check_blas.sh CV OUT PYTHON [REFERENCE_DIR]: a run names the BLAS it really
# computes with. The expected library comes from outside the harness: the
# real path of the libblas.so.3 that ldd (the dynamic loader) resolves for
# the binary in the same environment. It must be the one named by --version,
# by the report's root attributes `blas` and `blas_library`, and by
# summary.json; the reference BLAS (and only it) gets its one-line warning.
# With REFERENCE_DIR (Debian's .../blas, holding the reference libblas.so.3)
# the same is checked once more with that library put first on
# LD_LIBRARY_PATH, so both names and the warning are exercised.
set -u
cv=$1 out=$2 py=$3 refdir=${4:-}
fail() { echo "check_blas: $*" >&2; exit 1; }

check() { # check LABEL: runs in the current environment
  local label=$1 dir=$out/$1
  rm -rf "$dir"; mkdir -p "$dir"
  local lib
  lib=$(ldd "$cv" | awk '$1 == "libblas.so.3" { print $3 }')
  [ -n "$lib" ] || fail "$label: ldd finds no libblas.so.3 for $cv"
  lib=$(realpath "$lib")
  echo "$label: the loader resolves libblas.so.3 to $lib"
  local version
  version=$("$cv" --version) || fail "$label: --version failed"
  echo "$version"
  grep -qF -- ": $lib" <<<"$version" || fail "$label: --version does not name $lib"
  "$cv" --case bias_gelu_bs1 --impl nonreentrant --steps 1 --out "$dir" >"$dir/stdout" 2>"$dir/stderr" \
    || { cat "$dir/stdout" "$dir/stderr"; fail "$label: the run failed"; }
  "$py" - "$dir/bias_gelu_bs1.h5" "$dir/summary.json" "$lib" <<'PY' || fail "$label: report attributes"
import h5py, json, sys
h5, summary, lib = sys.argv[1:]
a = h5py.File(h5, "r").attrs
name, path = a["blas"].decode(), a["blas_library"].decode()
print(f"report: blas = {name!r}, blas_library = {path!r}")
assert path == lib, f"blas_library {path!r} is not the loaded {lib!r}"
assert ("openblas" in lib) == name.startswith("OpenBLAS "), f"{name!r} does not fit {lib!r}"
assert ("/blas/libblas.so" in lib) == (name == "reference BLAS (libblas3)"), f"{name!r} does not fit {lib!r}"
s = json.load(open(summary))
assert s["blas"] == name, f"summary.json blas {s['blas']!r} != {name!r}"
PY
  local warnings
  warnings=$(grep -c "reference BLAS" "$dir/stderr")
  case "$lib" in
    */blas/libblas.so*) [ "$warnings" -eq 1 ] || fail "$label: reference BLAS without exactly one warning line" ;;
    *) [ "$warnings" -eq 0 ] || fail "$label: a warning about the reference BLAS where $lib is loaded" ;;
  esac
  cat "$dir/stderr"
}

check default
if [ -n "$refdir" ] && [ -e "$refdir/libblas.so.3" ]; then
  LD_LIBRARY_PATH="$refdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" check reference
  default_lib=$(realpath "$(ldd "$cv" | awk '$1 == "libblas.so.3" { print $3 }')")
  ref_lib=$(realpath "$refdir/libblas.so.3")
  [ "$default_lib" != "$ref_lib" ] || echo "note: the default BLAS is the reference one too"
else
  echo "no reference BLAS at '$refdir': only the default BLAS checked"
fi
echo "check_blas: ok"
