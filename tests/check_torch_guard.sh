#!/usr/bin/env bash
# check_torch_guard.sh CV OUT: a harness run against another libtorch than
# the one it was compiled for is refused with one line and exit 2, before
# anything is written. "Another libtorch" is made from outside: the linked
# torch's libraries seen through a directory of links whose torch/version.py
# names another version, put first on LD_LIBRARY_PATH (the binary's RUNPATH
# comes after it), so the dynamic loader really loads them from there.
set -u
cv=$1 out=$2
fail() { echo "check_torch_guard: $*" >&2; exit 1; }
lib=$(ldd "$cv" | awk '$1 == "libtorch_cpu.so" { print $3 }')
[ -n "$lib" ] || fail "ldd finds no libtorch_cpu.so for $cv"
torchlib=$(dirname "$(realpath "$lib")")
rm -rf "$out"; mkdir -p "$out/other/torch/lib"
for f in "$torchlib"/*.so*; do ln -s "$f" "$out/other/torch/lib/"; done
# The wheel's libraries find their CUDA libraries through $ORIGIN/../../nvidia.
[ -d "$torchlib/../../nvidia" ] && ln -s "$(realpath "$torchlib/../../nvidia")" "$out/other/nvidia"
printf "__version__ = '2.10.0+cu128'\ncuda: Optional[str] = '12.8'\n" > "$out/other/torch/version.py"

# The running version is read from where the libraries were loaded.
version=$(LD_LIBRARY_PATH="$out/other/torch/lib" "$cv" --version) || fail "--version failed"
echo "$version"
grep -q "^torch 2.10.0+cu128 (CUDA 12.8) from $out/other/torch/lib/libtorch_cpu.so$" <<<"$version" \
  || fail "--version does not name the loaded torch"
grep -q "MISMATCH" <<<"$version" || fail "--version does not flag the mismatch"

# A run, a diff and a judge are refused: one line, exit 2, nothing written.
for args in "--case bias_gelu_bs1 --out $out/run" "judge --out $out/run $out/none.h5"; do
  LD_LIBRARY_PATH="$out/other/torch/lib" "$cv" $args >"$out/stdout" 2>"$out/stderr"
  rc=$?
  [ "$rc" -eq 2 ] || fail "'$args': exit $rc, wanted 2"
  [ "$(wc -l <"$out/stderr")" -eq 1 ] || fail "'$args': stderr is not one line: $(cat "$out/stderr")"
  grep -q "^ckpt-verify: compiled against torch .* but running with torch 2.10.0+cu128 ($out/other/torch/lib/libtorch_cpu.so)" \
    "$out/stderr" || fail "'$args': stderr: $(cat "$out/stderr")"
  [ ! -s "$out/stdout" ] || fail "'$args': wrote to stdout"
  [ ! -e "$out/run" ] || fail "'$args': created $out/run"
done
cat "$out/stderr"

# The same binary with its own libtorch runs.
"$cv" --version | grep -q MISMATCH && fail "its own libtorch flagged as a mismatch"
echo "check_torch_guard: ok"
