#!/usr/bin/env bash
# The executor's one-GPU model steps beside PyTorch + torch.compile, with the GPU's power and
# clocks logged: build `mplan` (Release, sm_90) under build-gpu/; the reference GPT and the
# Llama-family model through scripts/gpu_bench.sh (TORCH_GPUS=1, a per-op trace of the last
# iteration summed by scripts/trace_top_ops.py); `nvidia-smi dmon` (power, clocks) in the
# background with the start time of each part in marks.txt. Writes to $OUT (default gpu-steps).
# Usage: scripts/gpu_model_steps.sh TORCH_GPT_SCRIPT
# Env: ITERS (default 5), WARMUP (2), ATTENTION ("default"; "default flash2" runs the GPT step
# again with MPLAN_ATTENTION=flash2, the mma.sync attention kernels, without PyTorch).
set -uo pipefail
cd "$(dirname "$0")/.."
torch_gpt=$1
o=${OUT:-gpu-steps}
mkdir -p "$o/l"
. scripts/gpu_env.sh
start=$(date +%s)
gpu_build build-gpu "$o/l" mplan || exit 1
mkdir -p build-gpu/bin
cp build-gpu/cli/mplan build-gpu/bin/
echo "built in $(( $(date +%s) - start )) s"
nvidia-smi dmon -s pc -d 1 -o T >"$o/dmon.txt" 2>&1 &
dmon=$!
export ITERS=${ITERS:-5} WARMUP=${WARMUP:-2} TORCH_MODES=compile TORCH_GPUS=1 TRACE_LEVEL=ops
for variant in ${ATTENTION:-default}; do
  torch=$torch_gpt llama=1
  if [ "$variant" != default ]; then
    export MPLAN_ATTENTION=$variant
    torch=none llama=0
  fi
  date +"== gpt $variant %H:%M:%S" >>"$o/marks.txt"
  OUT="$o/gpt-$variant" bash scripts/gpu_bench.sh build-gpu/bin "$torch" \
    configs/plans/gpt3-1.3b-1gpu.json >"$o/gpt-$variant.log" 2>&1
  if [ "$llama" = 1 ]; then
    date +"== llama $variant %H:%M:%S" >>"$o/marks.txt"
    OUT="$o/llama-$variant" bash scripts/gpu_bench.sh build-gpu/bin bench/torch_llama.py \
      configs/plans/llama3.2-1b-1gpu.json >"$o/llama-$variant.log" 2>&1
  fi
  unset MPLAN_ATTENTION
done
date +"== end %H:%M:%S" >>"$o/marks.txt"
kill "$dmon"
for log in "$o"/*.log; do
  sed -n '/== summary/,$p' "$log"
done
for dir in "$o"/gpt-* "$o"/llama-*; do
  [ -d "$dir" ] || continue
  for t in "$dir"/trace-*.json; do
    [ -f "$t" ] && python3 scripts/trace_top_ops.py "$t" 20 >"$dir/ops.txt" && rm -f "$t"
  done
done
echo "done in $(( $(date +%s) - start )) s"
