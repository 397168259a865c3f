#!/usr/bin/env bash
# Sets everything up and runs the whole test suite: installs dependencies,
# configures and builds (build/), runs every CTest test. Arguments go to ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
jobs=$(nproc)
# Warnings are errors in CI (CI=true) or with CKPT_WERROR=ON; not otherwise.
werror=${CKPT_WERROR:-OFF}
if [ "${CI:-}" = true ]; then werror=ON; fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCKPT_WERROR="$werror" >/dev/null
cmake --build build -j "$jobs"
# JUnit for the CI server (build/ctest-junit.xml); then every skipped test
# with the reason it gave, since ctest's summary names none.
rc=0
ctest --test-dir build --output-on-failure -j "$jobs" --output-junit ctest-junit.xml "$@" || rc=$?
python3 tests/skip_reasons.py build/ctest-junit.xml || true
exit $rc
