#!/usr/bin/env bash
# ctest_gpu.sh COMMAND...: runs COMMAND on the GPU CTest allocated to the
# test. With a resource spec file (configured with
# -DCTEST_RESOURCE_SPEC_FILE=spec.json, or `ctest --resource-spec-file`)
# CTest sets CTEST_RESOURCE_GROUP_0_GPUS="id:N,slots:1" for a test declaring
# RESOURCE_GROUPS gpus:1; exposing only GPU N makes it cuda:0 for the case,
# so tests on an N-GPU host never share a GPU (docs/nightly.md). Without a
# spec file nothing is set and COMMAND runs as it is.
set -euo pipefail
alloc=${CTEST_RESOURCE_GROUP_0_GPUS:-}
if [ -n "$alloc" ]; then
  id=${alloc#id:}
  id=${id%%,*}
  export CUDA_VISIBLE_DEVICES=$id
fi
exec "$@"
