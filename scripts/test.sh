#!/usr/bin/env bash
# Builds (via scripts/setup.sh) and runs the whole test suite: labels cpu and mpi run here; gpu
# tests skip with a message where there is no GPU. Then the cpu and mpi tests again in a second
# build (build-asan) with AddressSanitizer and UndefinedBehaviorSanitizer, every report fatal;
# MPLAN_SANITIZERS=0 skips that part. Extra arguments go to both ctest runs.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
phase() { echo "== test.sh: $1 ($((SECONDS - start)) s so far)"; }
scripts/setup.sh
phase "built; the tests"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
ctest --test-dir build --output-on-failure -j "$(nproc)" "$@"

phase "tests passed"
if [ "${MPLAN_SANITIZERS:-1}" = 0 ]; then exit 0; fi
# -O1: sanitized code near full speed at a fraction of -O3's compile time; no GPU code, no
# benchmarks (neither runs here).
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" \
  -DMPLAN_WITH_GPU=OFF -DMPLAN_BUILD_BENCH=OFF -DMPLAN_SANITIZE=address,undefined >/dev/null
cmake --build build-asan -j "$(nproc)"
phase "sanitized build done; its tests"
# OpenMPI keeps allocations for the life of the process: the leak checker ignores what its
# libraries allocate (scripts/lsan-openmpi.supp), which needs full stacks through its code
# (fast_unwind_on_malloc=0: OpenMPI has no frame pointers). Every other report fails the test.
# The sweep over every GPU count 1 .. 1024 ran above; sanitized it takes 4 minutes of the budget.
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1:fast_unwind_on_malloc=0
export LSAN_OPTIONS="suppressions=$PWD/scripts/lsan-openmpi.supp:print_suppressions=0"
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
ctest --test-dir build-asan --output-on-failure -j "$(nproc)" -L 'cpu|mpi' \
  -E '^SweepWithSimulator\.EveryGpuCountUpTo1024$' "$@"
phase "sanitized tests passed"
