#!/usr/bin/env bash
# Build; every gpu test and the op checks (first run of ac2eb44's column-sum layout and
# 0194304's switch); the attention bench; cuBLASLt's candidates for the Llama model's GEMMs timed
# under sustained load (mplan_gemm_sweep), with the GPU's power and SM clock sampled every 100 ms.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export MPLAN_EXEC_GOLDEN="$PWD/tests/exec/oracle/golden.json"
o=$OUT; mkdir -p /tmp/l; s=$(date +%s)
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMPLAN_WITH_GPU=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DMPLAN_BUILD_BENCH=OFF -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc > /tmp/l/cmake.log 2>&1
cmake --build build-gpu -j16 --target mplan mplan_gpu_bench mplan_gpu_tests mplan_gemm_sweep > /tmp/l/build.log 2>&1 || { tail -30 /tmp/l/build.log; exit 1; }
mkdir -p build-gpu/bin; cp build-gpu/cli/mplan build-gpu/bin/
echo "built $(( $(date +%s) - s )) s"
b=build-gpu/exec/cuda/tools/mplan_gpu_bench
{
timeout 150 build-gpu/tests/exec/cuda/mplan_gpu_tests > /tmp/l/gpu_tests.log 2>&1; echo "gpu tests rc $?"
grep -E "^\[  (FAILED|PASSED|SKIPPED) |tests ran" /tmp/l/gpu_tests.log | head
grep -E "FAIL" /tmp/l/gpu_tests.log | head -8
timeout 150 $b --checks-only > /tmp/l/checks.log 2>&1; echo "checks rc $?"; grep -E "^checks|FAIL" /tmp/l/checks.log | head -12
grep -E "column sums" /tmp/l/checks.log | cut -c1-170 | head -8
} > $o/correctness.txt 2>&1
cat $o/correctness.txt
timeout 150 $b --no-checks --only attention > /tmp/l/att.log 2>&1
grep -E "^ *(attention|bias_grad)" /tmp/l/att.log | grep -v timed > $o/bench.txt 2>&1
cat $o/bench.txt
nvidia-smi --query-gpu=timestamp,power.draw,clocks.sm,temperature.gpu --format=csv,noheader -lms 100 > $o/power.csv 2>&1 &
pq=$!
date +"sweep start %H:%M:%S.%N" > $o/sweep.txt
timeout 200 build-gpu/exec/cuda/tools/mplan_gemm_sweep --model llama --ms 150 --heat-ms 1000 --candidates 12 >> $o/sweep.txt 2>&1
echo "sweep rc $?" >> $o/sweep.txt
kill $pq
cat $o/sweep.txt
echo "total $(( $(date +%s) - s )) s"
