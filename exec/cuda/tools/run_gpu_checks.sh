#!/usr/bin/env bash
# One GPU session's checks: mplan_gpu_bench (every CUDA op against the CPU backend, then kernel
# timings at the reference workload's shapes), the gpu-label tests, and the NCCL world test under
# mpirun on the visible GPUs. Uses prebuilt binaries from BIN_DIR when they start on this machine,
# else builds (Release, sm_90) into build-gpu/. Full logs go to $OUT (or build-gpu/logs/); the
# bench table is printed last. Exit status: 0 when every check and test passed.
# Usage: exec/cuda/tools/run_gpu_checks.sh [BIN_DIR]
set -uo pipefail
cd "$(dirname "$0")/../../.."
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export MPLAN_EXEC_GOLDEN="$PWD/tests/exec/oracle/golden.json"  # for binaries built elsewhere
log=${OUT:-build-gpu/logs}
mkdir -p "$log"
bin=${1:-}
if [ -n "$bin" ] && ! "$bin/mplan_gpu_bench" --help >"$log/prebuilt.log" 2>&1; then
  echo "prebuilt binaries in $bin do not start here (see $log/prebuilt.log); building"
  bin=""
fi
if [ -z "$bin" ]; then
  cuda_args=()
  if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
    cuda_args+=(-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc)
  fi
  start=$(date +%s)
  if ! cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DMPLAN_WITH_GPU=ON \
      -DCMAKE_CUDA_ARCHITECTURES=90 -DMPLAN_BUILD_BENCH=OFF "${cuda_args[@]}" >"$log/cmake.log" 2>&1 ||
     ! cmake --build build-gpu -j "$(nproc)" --target mplan_gpu_bench mplan_gpu_tests \
      mplan_gpu_mpi_tests >"$log/build.log" 2>&1; then
    tail -40 "$log/cmake.log" "$log/build.log" 2>/dev/null
    echo "build failed"
    exit 1
  fi
  mkdir -p build-gpu/bin
  cp build-gpu/exec/cuda/tools/mplan_gpu_bench build-gpu/tests/exec/cuda/mplan_gpu_tests \
     build-gpu/tests/exec/cuda/mplan_gpu_mpi_tests build-gpu/bin/
  bin=build-gpu/bin
  echo "built in $(( $(date +%s) - start )) s"
fi

nvidia-smi -L 2>&1 | tee "$log/gpus.txt"
ngpu=$(grep -c '^GPU' "$log/gpus.txt")
status=0

timeout 600 "$bin/mplan_gpu_tests" >"$log/gpu_tests.log" 2>&1 || status=1
echo "gpu tests: $(grep -E '^\[  PASSED  \]' "$log/gpu_tests.log" | tail -1)" \
  "$(grep -cE '^\[  SKIPPED \] .*\(' "$log/gpu_tests.log") skipped"
grep -E '^\[  FAILED  \] .*\(' "$log/gpu_tests.log" | head -40
grep -E '^  (FAIL|fast vs)' "$log/gpu_tests.log" | head -40

np=$(( ngpu >= 4 ? 4 : (ngpu >= 2 ? 2 : 0) ))
if [ "$np" -gt 0 ]; then
  timeout 300 mpirun --oversubscribe -np "$np" -x NCCL_NVLS_ENABLE "$bin/mplan_gpu_mpi_tests" \
    >"$log/gpu_mpi_tests.log" 2>&1 || status=1
  echo "NCCL world test on $np ranks: $(grep -E '^\[  (PASSED|FAILED) ' "$log/gpu_mpi_tests.log" | tr '\n' ' ')"
fi

timeout 300 "$bin/mplan_gpu_bench" >"$log/bench.log" 2>&1 || status=1
grep -E '^FAIL' "$log/bench.log" | head -40
sed -n '/^op  /,$p' "$log/bench.log"
grep -E '^checks:' "$log/bench.log" | tail -1
exit $status
