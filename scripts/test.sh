#!/usr/bin/env bash
# Builds (via scripts/setup.sh) and runs the whole test suite: labels cpu and mpi run here; gpu
# tests skip with a message where there is no GPU. Extra arguments go to ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
ctest --test-dir build --output-on-failure -j "$(nproc)" "$@"
