#!/usr/bin/env bash
# Downloads, without installing anything, the Debian packages that
# scripts/gpu-build.sh unpacks on a GPU machine that has PyTorch, nvcc,
# CMake and HDF5 but no cmocka, inih or jansson and no package registry:
# the -dev packages and their runtime libraries, into .gpu-deps/ (ignored by
# git). Run it where apt-get works, then take .gpu-deps/ along with the
# checkout.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(libcmocka0 libcmocka-dev libinih1 libinih-dev libjansson4 libjansson-dev)

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi

mkdir -p .gpu-deps
cd .gpu-deps
rm -f ./*.deb
# apt's download sandbox user cannot write into a root-owned checkout; the
# files are only written here, never unpacked or installed.
download() { apt-get -o APT::Sandbox::User=root download "${packages[@]}"; }
if ! download; then
  echo "fetch-gpu-deps: refreshing the package lists and trying again"
  $SUDO apt-get update -qq
  download
fi
ls -1 ./*.deb
echo "fetch-gpu-deps: ${#packages[@]} packages in $(pwd)"
