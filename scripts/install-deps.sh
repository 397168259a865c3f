#!/usr/bin/env bash
# Installs everything ckpt-verify needs to build, test and plot: Debian's
# packages with apt-get, then the project's Python environment with the
# pinned torch from PyPI (scripts/setup-env.sh: .venv/, whose libtorch the C
# build links). Idempotent: does nothing when everything is already there.
# clang and libclang-rt-dev (libFuzzer and the sanitizer runtimes) build the
# fuzz targets (CKPT_FUZZ=ON, fuzz/); valgrind runs the memcheck test;
# chromium and chromium-driver run the report.html tests in a real browser
# (label html, through selenium from env/requirements.txt).
# torch, h5py and numpy come from PyPI (env/requirements.txt), never from
# Debian: one torch for the C build and every Python part.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libhdf5-dev hdf5-tools gnuplot-nox
  libcmocka-dev libinih-dev libjansson-dev
  python3 python3-venv
  clang libclang-rt-dev valgrind
  chromium chromium-driver
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
bash "$(dirname "$0")/setup-env.sh"
# The XLA frontend's own environment (torch 2.9.0 + torch-xla 2.9.0; the
# tests labelled xla run there, docs/stack.md). CKPT_NO_XLA=1 leaves it out;
# its tests then report Skipped.
if [ "${CKPT_NO_XLA:-0}" != 1 ]; then
  bash "$(dirname "$0")/setup-env.sh" env/xla-requirements.txt .venv-xla
fi
# The JAX frontend's environment (jax and jaxlib 0.10.2 for the CPU, no
# torch; the tests labelled jax run there). 22 to 35 s from a filled
# wheelhouse, measured. CKPT_NO_JAX=1 leaves it out; its tests then report
# Skipped.
if [ "${CKPT_NO_JAX:-0}" != 1 ]; then
  bash "$(dirname "$0")/setup-env.sh" env/jax-requirements.txt .venv-jax
fi
