#!/usr/bin/env bash
# Where the Llama step's untraced ~19 ms go: both models at trace level ops (ITERS=3 WARMUP=1),
# their traces kept for a gap analysis (scripts/trace_gaps.py).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
o=$OUT; mkdir -p /tmp/l; s=$(date +%s)
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMPLAN_WITH_GPU=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DMPLAN_BUILD_BENCH=OFF -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc > /tmp/l/cmake.log 2>&1
cmake --build build-gpu -j16 --target mplan > /tmp/l/build.log 2>&1 || { tail -30 /tmp/l/build.log; exit 1; }
mkdir -p build-gpu/bin; cp build-gpu/cli/mplan build-gpu/bin/
echo "built $(( $(date +%s) - s )) s"
export ITERS=3 WARMUP=1 TRACE_LEVEL=ops
for m in llama3.2-1b gpt3-1.3b; do
  OUT=/tmp/l/$m timeout 150 bash scripts/gpu_bench.sh build-gpu/bin none configs/plans/$m-1gpu.json > /tmp/l/$m.log 2>&1
  sed -n '/== summary/,$p' /tmp/l/$m.log
  gzip -c /tmp/l/$m/trace-$m-1gpu.json > $o/trace-$m.json.gz
done
echo "total $(( $(date +%s) - s )) s"
