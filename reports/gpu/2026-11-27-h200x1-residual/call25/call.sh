#!/usr/bin/env bash
# After the residual-epilogue fixes: build; every gpu test; checks (and their residual, RMSNorm
# and attention lines); the GEMM bench rows of proj and fc2.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export MPLAN_EXEC_GOLDEN="$PWD/tests/exec/oracle/golden.json"
o=$OUT; s=$(date +%s)
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMPLAN_WITH_GPU=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DMPLAN_BUILD_BENCH=OFF -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc > /tmp/cmake.log 2>&1
cmake --build build-gpu -j16 --target mplan mplan_gpu_bench mplan_gpu_tests > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log; exit 1; }
echo "built $(( $(date +%s) - s )) s"
b=build-gpu/exec/cuda/tools/mplan_gpu_bench
timeout 150 build-gpu/tests/exec/cuda/mplan_gpu_tests > $o/gpu_tests.log 2>&1; echo "gpu tests rc $?"
grep -E "^\[  (FAILED|PASSED|SKIPPED) |tests ran" $o/gpu_tests.log | head
timeout 150 $b --checks-only > $o/checks.log 2>&1; echo "checks rc $?"; grep -E "^checks|FAIL" $o/checks.log | head -12
grep "backward dq" $o/checks.log | sed 's/.*(\([0-9.]*x\) tol).*/\1/' | sort -n | tail -3 | tr '\n' ' '; echo "(largest dq ratios)"
timeout 120 $b --no-checks --only gemm > $o/gemm.log 2>&1; grep -E "^gemm (proj|fc2) fwd" $o/gemm.log
echo "total $(( $(date +%s) - s )) s"
