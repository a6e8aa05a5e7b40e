#!/usr/bin/env bash
# One call on a one-GPU machine, everything the executor's one-GPU reports need, in the order
# that keeps the most valuable part if time runs out: build (Release, -j nproc) under
# build-gpu/; the GPU checks and gpu tests (exec/cuda/tools/run_gpu_checks.sh); the attention
# kernels of every family at their shapes; the reference GPT and the Llama-family model on one
# GPU beside PyTorch + torch.compile (scripts/gpu_bench.sh, same call); the reference workload
# with recompute selective and full. Logs to $OUT (default gpu-one). If the default attention
# kernels fail their tests, the runs use MPLAN_ATTENTION=flash2 and say so.
# Usage: scripts/gpu_one_gpu_session.sh TORCH_GPT_SCRIPT
# Env: ITERS (default 5), WARMUP (2).
set -uo pipefail
cd "$(dirname "$0")/.."
torch_gpt=$1
out=${OUT:-gpu-one}
mkdir -p "$out"
. scripts/gpu_env.sh
start=$(date +%s)
elapsed() { echo "($(( $(date +%s) - start )) s)"; }
gpu_build build-gpu "$out" mplan mplan_gpu_bench mplan_gpu_tests mplan_gpu_mpi_tests || exit 1
bin=build-gpu/bin
mkdir -p "$bin"
cp build-gpu/cli/mplan build-gpu/exec/cuda/tools/mplan_gpu_bench \
   build-gpu/tests/exec/cuda/mplan_gpu_tests build-gpu/tests/exec/cuda/mplan_gpu_mpi_tests "$bin/"
echo "built at revision $(git rev-parse --short HEAD 2>/dev/null || echo unknown) $(elapsed)"

OUT="$out/checks" bash exec/cuda/tools/run_gpu_checks.sh "$bin" | grep -vE '^(gemm|layernorm|add|gelu|bias|embedding|position|xent|sum|grad|adamw|cast) '
if ! grep -qE '^\[  PASSED  \]' "$out/checks/gpu_tests.log" ||
   grep -qE '^\[  FAILED  \] .*Attention' "$out/checks/gpu_tests.log"; then
  export MPLAN_ATTENTION=flash2
  echo "attention tests failed: the runs below use MPLAN_ATTENTION=flash2"
fi
echo "checks done $(elapsed)"

export ITERS=${ITERS:-5} WARMUP=${WARMUP:-2} TORCH_MODES=compile TORCH_GPUS=1
OUT="$out/gpt" bash scripts/gpu_bench.sh "$bin" "$torch_gpt" configs/plans/gpt3-1.3b-1gpu.json |
  sed -n '/== summary/,$p'
echo "reference GPT done $(elapsed)"
OUT="$out/llama" bash scripts/gpu_bench.sh "$bin" bench/torch_llama.py \
  configs/plans/llama3.2-1b-1gpu.json | sed -n '/== summary/,$p'
echo "Llama done $(elapsed)"
OUT="$out/recompute" bash scripts/gpu_bench.sh "$bin" none configs/plans/gpt3-1.3b-1gpu-selective.json \
  configs/plans/gpt3-1.3b-1gpu-full.json | sed -n '/== summary/,$p'
echo "recompute done $(elapsed)"
rm -f "$out"/*/trace-*.json
