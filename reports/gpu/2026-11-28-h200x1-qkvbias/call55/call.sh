#!/usr/bin/env bash
# Call 54's tree again on a fresh machine: build mplan only; GPT beside torch.compile (default
# trace level), to repeat the ratio.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
o=$OUT; mkdir -p /tmp/l; s=$(date +%s)
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMPLAN_WITH_GPU=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DMPLAN_BUILD_BENCH=OFF -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc > /tmp/l/cmake.log 2>&1
cmake --build build-gpu -j16 --target mplan > /tmp/l/build.log 2>&1 || { tail -30 /tmp/l/build.log; exit 1; }
mkdir -p build-gpu/bin; cp build-gpu/cli/mplan build-gpu/bin/
echo "built $(( $(date +%s) - s )) s"
export ITERS=5 WARMUP=2 TORCH_MODES=compile TORCH_GPUS=1
TRACE_LEVEL=summary OUT=/tmp/l/gpt timeout 200 bash scripts/gpu_bench.sh build-gpu/bin carry/torch_gpt.py configs/plans/gpt3-1.3b-1gpu.json > /tmp/l/gpt.log 2>&1
{
echo "== gpt"; sed -n '/== summary/,$p' /tmp/l/gpt.log; grep -E "iteration +[0-9]/" /tmp/l/gpt.log | grep -v torch | sed 's/.*iteration \+\([0-9]\).*(ms): \([0-9.]*\).*lm loss: \([0-9.E+-]*\).*grad norm: \([0-9.]*\).*/it \1 \2 ms loss \3 gnorm \4/'
echo "total $(( $(date +%s) - s )) s"
} > $o/models.txt 2>&1
cat $o/models.txt
