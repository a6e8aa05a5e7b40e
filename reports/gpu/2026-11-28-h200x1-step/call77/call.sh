#!/usr/bin/env bash
# Iteration graphs (MPLAN_CUDA_GRAPH=1: the iteration's device work recorded once as a CUDA graph
# and replayed): build; the tiny GPT plan with and without (losses bit for bit); Llama with graphs
# beside its PyTorch baseline, then Llama alone without and with graphs; GPT with graphs alone.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
o=$OUT; mkdir -p /tmp/l; s=$(date +%s)
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMPLAN_WITH_GPU=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DMPLAN_BUILD_BENCH=OFF -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc > /tmp/l/cmake.log 2>&1
cmake --build build-gpu -j16 --target mplan > /tmp/l/build.log 2>&1 || { tail -30 /tmp/l/build.log; exit 1; }
mkdir -p build-gpu/bin; cp build-gpu/cli/mplan build-gpu/bin/
echo "built $(( $(date +%s) - s )) s"
{
for g in 0 1; do
  MPLAN_CUDA_GRAPH=$g MPLAN_STEP_CLOCK=1 timeout 60 build-gpu/bin/mplan run configs/plans/tiny-gpt.json --iters 5 > /tmp/l/tiny$g.log 2>&1; echo "tiny graph=$g rc $?"
  grep -o "lm loss: [0-9.E+-]*\|grad norm: [0-9.]*" /tmp/l/tiny$g.log | paste -sd' '
  grep -E "step clock|graphs|rror" /tmp/l/tiny$g.log | head -6
done
} > $o/correctness.txt 2>&1
cat $o/correctness.txt
echo "at $(( $(date +%s) - s )) s"
nvidia-smi dmon -s pc -d 1 -o T > /tmp/l/dmon.txt 2>&1 &
dm=$!
export ITERS=5 WARMUP=2 TORCH_MODES=compile TORCH_GPUS=1 MPLAN_STEP_CLOCK=1
MPLAN_CUDA_GRAPH=1 OUT=/tmp/l/llama timeout 200 bash scripts/gpu_bench.sh build-gpu/bin bench/torch_llama.py configs/plans/llama3.2-1b-1gpu.json > /tmp/l/llama.log 2>&1
MPLAN_CUDA_GRAPH=0 OUT=/tmp/l/llama-direct timeout 120 bash scripts/gpu_bench.sh build-gpu/bin none configs/plans/llama3.2-1b-1gpu.json > /tmp/l/llama-direct.log 2>&1
MPLAN_CUDA_GRAPH=1 OUT=/tmp/l/llama-graph timeout 120 bash scripts/gpu_bench.sh build-gpu/bin none configs/plans/llama3.2-1b-1gpu.json > /tmp/l/llama-graph.log 2>&1
MPLAN_CUDA_GRAPH=1 OUT=/tmp/l/gpt-graph timeout 120 bash scripts/gpu_bench.sh build-gpu/bin none configs/plans/gpt3-1.3b-1gpu.json > /tmp/l/gpt-graph.log 2>&1
kill $dm
{
for m in llama llama-direct llama-graph gpt-graph; do echo "== $m"; sed -n '/== summary/,$p' /tmp/l/$m.log; grep -E "iteration +[0-9]/" /tmp/l/$m.log | grep -v torch | sed 's/.*iteration \+\([0-9]\).*(ms): \([0-9.]*\).*lm loss: \([0-9.E+-]*\).*grad norm: \([0-9.]*\).*/it \1 \2 ms loss \3 gnorm \4/'; grep -h "step clock\|graphs\|rror" /tmp/l/$m.log | head -6; done
python3 - /tmp/l/dmon.txt <<'PY'
import sys, statistics
w, clk = [], []
for l in open(sys.argv[1]):
    f = l.split()
    if len(f) == 7 and f[1] == "0" and float(f[2]) > 300:
        w.append(float(f[2])); clk.append(float(f[6]))
if w:
    print("dmon: under load (> 300 W)", len(w), "s, median", statistics.median(w), "W, SM clock median", statistics.median(clk), "MHz, min", min(clk))
PY
echo "total $(( $(date +%s) - s )) s"
} > $o/models.txt 2>&1
cat $o/models.txt
