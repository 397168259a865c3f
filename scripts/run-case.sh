#!/usr/bin/env bash
# Sets everything up and runs ckpt-verify with the given arguments
# (default: --case bias_gelu_bs1). Builds into build/ first if needed.
set -euo pipefail
cd "$(dirname "$0")/.."
# One case needs neither XLA nor JAX: their environments (docs/stack.md) are
# left to scripts/test.sh.
CKPT_NO_XLA=1 CKPT_NO_JAX=1 bash scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc)" --target ckpt-verify >/dev/null
if [ $# -eq 0 ]; then set -- --case bias_gelu_bs1; fi
exec build/ckpt-verify "$@"
