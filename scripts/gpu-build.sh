#!/usr/bin/env bash
# Builds and tests ckpt-verify with its CUDA kernels on a machine that has
# PyTorch (built with CUDA), nvcc, CMake and HDF5 (pkg-config hdf5-serial)
# but no package registry. What such a machine lacks -- cmocka, inih,
# jansson -- comes as Debian .debs in .gpu-deps/ inside the checkout
# (scripts/fetch-gpu-deps.sh downloads them where apt works); they are
# unpacked into a private prefix under the build folder, never into /.
#
#   bash scripts/gpu-build.sh [--dry-run] [BUILD_DIR]    (default: build-gpu)
#
# Steps, each logged: unpack, configure against PyTorch's libtorch with
# CKPT_CUDA=ON, build, ctest -j$(nproc) (every test pinned to one thread,
# cmake/test_env.cmake), `ckpt-verify --case bias_gelu_bs1 --device cuda:0`,
# `ckpt-verify --suite gpu`, and `ckpt-verify plot` on the suite's run where
# gnuplot exists (plot_suite_gpu.log says so where it does not). Every step
# runs even when one before it failed (a failing CPU test must not hide the
# GPU results). Logs go to BUILD_DIR/gpu-logs, reports and plots to
# BUILD_DIR/gpu-reports.
#
# Then the GPU benchmark (issue 19): `ckpt-verify bench --device cuda:0`
# (cases/bench/gpu.ini: the GPU bench table and its targets), its plots
# where gnuplot exists (else: `ckpt-verify plot gpu-reports/bench_gpu` on
# the summary.json in the tarball, anywhere), scripts/bench_vs_torch_gpu.py
# (the ratio table ours / torch 2.x on the same GPU) and the bitwise CUDA
# cross-check of the unfused float32 / bfloat16 gpu cases against torch 2.x
# (scripts/crosscheck.sh). Their logs are gathered in gpu_bench.log.
#
# When $OUT is set (the folder that comes back from a
# lent GPU machine: at most 8 files) it gets machine.log, ctest.log,
# suite_gpu.log, predictions_suite_gpu.log, noise_margin_suite_gpu.log and
# gpu_bench.log to read at once, and every
# log and report in one tarball, gpu-build.tar.gz. Environment: PYTHON (default python3, the one with
# torch), CTEST_ARGS (extra ctest arguments, for example "-L gpu"), GPU_CTEST
# (off: skip ctest, so the rest fits a 10-minute command), GPU_BENCH (full,
# the default; quick: the bench_gpu_quick cases, seconds; off).
# --dry-run prints every step's command and runs none (no GPU, torch or
# .debs needed): what a GPU machine would run, checked anywhere.
# Exit status: 0 when every step passed, 1 otherwise, 2 when it cannot start.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
src=$PWD
dry=0
if [ "${1:-}" = "--dry-run" ]; then dry=1; shift; fi
build=${1:-build-gpu}
# A dry run touches nothing of the checkout: its (empty) logs go to a temporary folder.
if [ $dry -eq 1 ]; then build=$(mktemp -d); trap 'rm -rf "$build"' EXIT; fi
gpu_bench=${GPU_BENCH:-full}
case $gpu_bench in full|quick|off) ;; *) echo "gpu-build: GPU_BENCH must be full, quick or off, not '$gpu_bench'" >&2; exit 2 ;; esac
mkdir -p "$build"
build=$(cd "$build" && pwd)
logs=$build/gpu-logs
rm -rf "$logs"
mkdir -p "$logs"
reports=$build/gpu-reports
python=${PYTHON:-python3}
jobs=$(nproc)

failed=()
# step NAME COMMAND...: runs it with output to NAME.log (and its tail on the terminal).
step() {
  local name=$1; shift
  local start=$SECONDS
  echo "== gpu-build: $name: $*"
  if [ $dry -eq 1 ]; then return 0; fi
  if "$@" >"$logs/$name.log" 2>&1; then
    echo "== gpu-build: $name ok ($((SECONDS - start)) s)"
  else
    echo "== gpu-build: $name FAILED ($((SECONDS - start)) s), last lines of $logs/$name.log:"
    tail -n 25 "$logs/$name.log"
    failed+=("$name")
  fi
}

# ---- the .debs, unpacked into a prefix ---------------------------------------
shopt -s nullglob
debs=("$src"/.gpu-deps/*.deb)
if [ $dry -eq 1 ]; then
  echo "== gpu-build: dry run: unpack ${#debs[@]} .deb(s) from .gpu-deps, configure against PyTorch's libtorch"
  debs=()
elif [ ${#debs[@]} -eq 0 ]; then
  echo "gpu-build: no .deb files in $src/.gpu-deps (run scripts/fetch-gpu-deps.sh where apt-get works)" >&2
  exit 2
fi
prefix=$build/deps
rm -rf "$prefix"
mkdir -p "$prefix"
for f in "${debs[@]}"; do dpkg-deb -x "$f" "$prefix"; done
multiarch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
libdir=$prefix/usr/lib/$multiarch
# Debian's .pc files name /usr outright (cmocka.pc has no prefix variable at
# all): point every /usr path in them at the prefix.
for pc in "$libdir"/pkgconfig/*.pc; do
  sed -i -E "s#(^|[= ]|-I|-L)/usr([/ ]|\$)#\\1$prefix/usr\\2#g" "$pc"
done
export PKG_CONFIG_PATH=$libdir/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
export LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
[ $dry -eq 1 ] || echo "== gpu-build: unpacked ${#debs[@]} packages into $prefix"

# ---- configure, build, test ------------------------------------------------------
if [ $dry -eq 1 ]; then
  torch_prefix="<torch.utils.cmake_prefix_path>"
elif ! torch_prefix=$("$python" -c 'import torch; print(torch.utils.cmake_prefix_path)' 2>/dev/null); then
  echo "gpu-build: '$python' cannot import torch (set PYTHON to the python that has PyTorch)" >&2
  exit 2
fi
generator=()
if command -v ninja >/dev/null; then generator=(-G Ninja); fi
[ $dry -eq 1 ] || {
  echo "python: $(command -v "$python") torch $("$python" -c 'import torch; print(torch.__version__, torch.version.cuda)')"
  # This machine's own PyTorch (it cannot fetch the pinned wheel); every report
  # names it (libtorch_version, torch_cuda) beside the pin (torch_pinned).
  echo "pinned: $(grep '^torch==' "$src/env/requirements.txt")"
  echo "nvcc: $(command -v nvcc || echo none)"; nvcc --version 2>/dev/null | tail -n 2
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo "nvidia-smi: none"
  cmake --version | head -n 1
} >"$logs/machine.log" 2>&1
[ $dry -eq 1 ] || cat "$logs/machine.log"

# RelWithDebInfo: the build type of CI and scripts/test.sh, so the compiler
# sees the same code (gcc at -O3 warns where -O2 does not). No -Werror here:
# that is CI's (CKPT_WERROR), and this machine's gcc is another version.
step configure cmake -S "$src" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCKPT_CUDA=ON \
  -DCMAKE_PREFIX_PATH="$torch_prefix;$prefix/usr" -DCKPT_PYTHON="$(command -v "$python")"
step build cmake --build "$build" -j "$jobs"
if [ "${GPU_CTEST:-on}" != off ]; then
  # shellcheck disable=SC2086 # CTEST_ARGS is a list of words on purpose
  step ctest ctest --test-dir "$build" --output-on-failure -j "$jobs" ${CTEST_ARGS:-}
fi

# ---- the GPU runs --------------------------------------------------------------------
rm -rf "$reports"
step case_bias_gelu_bs1_cuda0 "$build/ckpt-verify" --case bias_gelu_bs1 --device cuda:0 --out "$reports/bias_gelu_bs1_cuda0"
step suite_gpu "$build/ckpt-verify" --suite gpu --out "$reports/suite_gpu"
if command -v gnuplot >/dev/null 2>&1; then
  step plot_suite_gpu "$build/ckpt-verify" plot "$reports/suite_gpu"
else
  echo "gpu-build: no plots: gnuplot is absent on this machine (not on PATH)" | tee "$logs/plot_suite_gpu.log"
fi
# The Python library's examples (python/examples) with device="cuda": the
# TransformerEncoderLayer stack PASS, the planted RNG bug and the hook
# checkpoint's counter reset FAIL, memory from the caching allocator.
step python_examples_cuda env CKPT_VERIFY="$build/ckpt-verify" CKPT_ATEN_LIB="$build/libckpt_aten.so" \
  bash -c 'for e in transformer_torch_checkpoint planted_no_rng_stash hook_checkpoint; do
    "$0" "$1/tests/python/check_example.py" "$e" --device cuda --out-dir "$2/python_cuda" || exit 1; done' \
  "$python" "$src" "$reports"
# The realworld suite's GPU groups (docs/realworld.md): megatron-core and
# TransformerEngine checkpoints on cuda:0, each Skipped with the reason where
# this machine's Python lacks the package; torch's own checkpoints on CUDA.
step realworld_gpu env CKPT_VERIFY="$build/ckpt-verify" CKPT_ATEN_LIB="$build/libckpt_aten.so" \
  bash -c '"$0" "$1/scripts/realworld.py" run --framework megatron --framework transformer_engine \
    --out-dir "$2/realworld_gpu" --results "$2/realworld_gpu.json"; rc=$?; [ $rc -eq 77 ] && rc=0
  "$0" "$1/scripts/realworld.py" run --case torch_checkpoint --device cuda \
    --out-dir "$2/realworld_torch_cuda" --results "$2/realworld_torch_cuda.json" || rc=1; exit $rc' \
  "$python" "$src" "$reports"
# Bytes held at the end of forward against the prediction, every gpu case:
# one-time workspaces (cuBLAS's) must be the warm-up's, not baseline_0's.
step predictions_suite_gpu "$python" "$src/tests/check_predictions.py" "$reports/suite_gpu" 0.05
# The GPU side of docs/noise.md: kernel-noise and planted-bug distances at
# the tensor's scale over the gpu suite, behind the NOISE margin.
step noise_margin_suite_gpu "$python" "$src/scripts/noise_margin.py" --plot - "$reports/suite_gpu"

# ---- the GPU benchmark, torch 2.x beside it, the CUDA cross-check ----------------
if [ "$gpu_bench" != off ]; then
  quick=(); torch_cases=()
  if [ "$gpu_bench" = quick ]; then
    quick=(--quick); torch_cases=(--case gpu_quick_gpt_bfloat16 --case gpu_quick_gpt_float32)
  fi
  # The bench table and its targets: cases/bench/gpu.ini on cuda:0.
  step bench_gpu "$build/ckpt-verify" bench ${quick[@]+"${quick[@]}"} --device cuda:0 --out "$reports/bench_gpu"
  if command -v gnuplot >/dev/null 2>&1; then
    step plot_bench_gpu "$build/ckpt-verify" plot "$reports/bench_gpu"
  else
    echo "gpu-build: no bench plots here: gnuplot is absent; draw them from the tarball with" \
      "ckpt-verify plot gpu-reports/bench_gpu" | tee "$logs/plot_bench_gpu.log"
  fi
  # The ratio table ours / torch (time and peak bytes, both measured alike).
  step bench_vs_torch_gpu "$python" "$src/scripts/bench_vs_torch_gpu.py" --bench-dir "$reports/bench_gpu" \
    --device cuda:0 --ckpt-verify "$build/ckpt-verify" --out "$reports/bench_vs_torch_gpu" \
    ${torch_cases[@]+"${torch_cases[@]}"}
fi
# Bitwise against torch 2.x on CUDA: the unfused float32 and bfloat16 cases
# of the gpu suite (mlp across batch sizes, gpt_block); torch_crosscheck.py
# draws dropout as the harness does on CUDA.
step crosscheck_cuda bash "$src/scripts/crosscheck.sh" --ckpt-verify "$build/ckpt-verify" --python "$python" \
  --out "$reports/crosscheck_cuda" gpu_fp32_none_bs1 gpu_fp32_none_bs8 gpu_fp32_none_bs32 \
  gpu_bf16_none_bs1 gpu_bf16_none_bs8 gpu_bf16_none_bs32 gpu_gpt_none
# One log to read for the benchmark: the bench table, the ratio table, the
# cross-check summary and where the plots are.
if [ $dry -eq 0 ]; then
  for f in bench_gpu plot_bench_gpu bench_vs_torch_gpu crosscheck_cuda; do
    [ -f "$logs/$f.log" ] && { echo "===== $f.log"; cat "$logs/$f.log"; }
  done >"$logs/gpu_bench.log"
fi

if [ -n "${OUT:-}" ] && [ $dry -eq 0 ]; then
  mkdir -p "$OUT"
  for f in machine ctest suite_gpu predictions_suite_gpu noise_margin_suite_gpu gpu_bench; do
    [ -f "$logs/$f.log" ] && cp "$logs/$f.log" "$OUT/"
  done
  tar -czf "$OUT/gpu-build.tar.gz" -C "$build" gpu-logs $( [ -d "$reports" ] && echo gpu-reports)
fi

if [ $dry -eq 1 ]; then
  echo "gpu-build: dry run: the steps above were printed, none ran"
  exit 0
fi
if [ ${#failed[@]} -eq 0 ]; then
  echo "gpu-build: every step passed; logs in $logs"
  exit 0
fi
echo "gpu-build: FAILED: ${failed[*]}; logs in $logs"
exit 1
