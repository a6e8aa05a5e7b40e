#!/usr/bin/env bash
# Kernel variants in the memory-bound bench only (a tree with experiment switches, not kept):
# RMSNorm's forward with 1, 2 or 8 warps a row (MPLAN_EXP_NORM 0 / 2 / 3 / 1) and RoPE's vector
# kernel at other (lanes, heads in flight) pairs (MPLAN_EXP_ROPE 0: (4, 2), 1: (4, 5), 2: (8, 5),
# 3: (10, 4), 4: (2, 5)); each set timed twice around the others.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
o=$OUT; mkdir -p /tmp/l; s=$(date +%s)
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMPLAN_WITH_GPU=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DMPLAN_BUILD_BENCH=OFF -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc > /tmp/l/cmake.log 2>&1
cmake --build build-gpu -j16 --target mplan_gpu_bench > /tmp/l/build.log 2>&1 || { tail -30 /tmp/l/build.log; exit 1; }
echo "built $(( $(date +%s) - s )) s"
b=build-gpu/exec/cuda/tools/mplan_gpu_bench
for rep in 1 2; do
timeout 100 $b --no-checks --only memory > /tmp/l/mem$rep.log 2>&1
grep -E "^(rmsnorm|rope|swiglu)" /tmp/l/mem$rep.log
done > $o/bench.txt
cat $o/bench.txt
echo "total $(( $(date +%s) - s )) s"
