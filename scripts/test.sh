#!/usr/bin/env bash
# Runs the whole test suite. Installs the packages (scripts/setup.sh --no-build), builds every
# target but the GPU executor with clang, AddressSanitizer and UndefinedBehaviorSanitizer under
# build-test/ (every report fatal), and runs the cpu and mpi tests there. The gpu tests need a
# GPU: where `nvidia-smi` sees one, the Release build of scripts/setup.sh (build/) runs them too;
# elsewhere they are skipped with a message. Extra arguments go to ctest.
# MPLAN_SANITIZERS=0 builds build-test/ without sanitizers (a quicker local run).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
phase() { echo "== test.sh: $1 ($((SECONDS - start)) s so far)"; }
scripts/setup.sh --no-build
phase "packages installed; the sanitized build"

sanitize=address,undefined
[ "${MPLAN_SANITIZERS:-1}" = 0 ] && sanitize=""
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
# Libraries at -O2 (the tests run their code), test sources at -O0 (tests/CMakeLists.txt), the
# CPU backend's loops unsanitized at -O3 (mplan_fast_numerics in CMakeLists.txt).
cmake -S . -B build-test "${generator[@]}" -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" -DMPLAN_WITH_GPU=OFF \
  -DMPLAN_BUILD_BENCH=OFF -DMPLAN_SANITIZE="$sanitize" >/dev/null
cmake --build build-test -j "$(nproc)"
phase "built; the cpu and mpi tests"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
# The fast unwinder everywhere but where OpenMPI allocates: the mpi tests and `mplan run` set
# fast_unwind_on_malloc=0 themselves (tests/exec/CMakeLists.txt, tests/cli/run_test.cpp), so
# that OpenMPI's process-lifetime allocations match scripts/lsan-openmpi.supp by library.
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1
export LSAN_OPTIONS="suppressions=$PWD/scripts/lsan-openmpi.supp:print_suppressions=0"
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
ctest --test-dir build-test --output-on-failure -j "$(nproc)" -L 'cpu|mpi' "$@"
phase "cpu and mpi tests passed"

if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  scripts/setup.sh
  ctest --test-dir build --output-on-failure -L gpu "$@"
  phase "gpu tests passed"
else
  echo "gpu tests skipped: no GPU here (on a GPU machine this script builds and runs them too;" \
       "exec/cuda/tools/run_gpu_checks.sh runs them alone)"
fi
