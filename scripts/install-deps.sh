#!/usr/bin/env bash
# Installs (with apt-get) everything ckpt-verify needs to build, test and
# plot. Idempotent: does nothing when every package is already installed.
# clang and libclang-rt-dev (libFuzzer and the sanitizer runtimes) build the
# fuzz targets (CKPT_FUZZ=ON, fuzz/); valgrind runs the memcheck test.
# libopenblas0-pthread takes over the libblas.so.3 alternative that Debian's
# libtorch calls: without it the reference BLAS makes every matmul ~25x slower.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libtorch-dev libopenblas0-pthread libhdf5-dev hdf5-tools gnuplot-nox
  libcmocka-dev libinih-dev libjansson-dev
  python3 python3-torch python3-h5py python3-numpy
  clang libclang-rt-dev valgrind
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
