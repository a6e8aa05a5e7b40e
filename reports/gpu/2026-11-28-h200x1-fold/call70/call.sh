#!/usr/bin/env bash
# The fused cross-entropy kernel's passes over one helper (review): build; the backend gpu tests
# and every op check; Llama alone (losses against call 69's).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
o=$OUT; mkdir -p /tmp/l; s=$(date +%s)
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMPLAN_WITH_GPU=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DMPLAN_BUILD_BENCH=OFF -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc > /tmp/l/cmake.log 2>&1
cmake --build build-gpu -j16 --target mplan mplan_gpu_bench mplan_gpu_tests > /tmp/l/build.log 2>&1 || { tail -30 /tmp/l/build.log; exit 1; }
mkdir -p build-gpu/bin; cp build-gpu/cli/mplan build-gpu/bin/
echo "built $(( $(date +%s) - s )) s"
{
timeout 100 build-gpu/tests/exec/cuda/mplan_gpu_tests --gtest_filter='CudaBackend*' > /tmp/l/gpu_tests.log 2>&1; echo "gpu tests rc $?"
grep -E "^\[  (FAILED|PASSED|SKIPPED) " /tmp/l/gpu_tests.log | head
timeout 100 build-gpu/exec/cuda/tools/mplan_gpu_bench --checks-only > /tmp/l/checks.log 2>&1; echo "checks rc $?"
grep -E "^checks|FAIL" /tmp/l/checks.log | head -12
export ITERS=5 WARMUP=2
OUT=/tmp/l/llama timeout 120 bash scripts/gpu_bench.sh build-gpu/bin none configs/plans/llama3.2-1b-1gpu.json > /tmp/l/llama.log 2>&1
sed -n '/== summary/,$p' /tmp/l/llama.log
grep -E "iteration +[0-9]/" /tmp/l/llama.log | sed 's/.*iteration \+\([0-9]\).*(ms): \([0-9.]*\).*lm loss: \([0-9.E+-]*\).*grad norm: \([0-9.]*\).*/it \1 \2 ms loss \3 gnorm \4/'
echo "total $(( $(date +%s) - s )) s"
} > $o/out.txt 2>&1
cat $o/out.txt
