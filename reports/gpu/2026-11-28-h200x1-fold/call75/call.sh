#!/usr/bin/env bash
# The final tree (8064486's GPU code, no experiment): build mplan; Llama beside its PyTorch
# baseline once, with the power and SM clock.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
o=$OUT; mkdir -p /tmp/l; s=$(date +%s)
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMPLAN_WITH_GPU=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DMPLAN_BUILD_BENCH=OFF -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc > /tmp/l/cmake.log 2>&1
cmake --build build-gpu -j16 --target mplan > /tmp/l/build.log 2>&1 || { tail -30 /tmp/l/build.log; exit 1; }
mkdir -p build-gpu/bin; cp build-gpu/cli/mplan build-gpu/bin/
echo "built $(( $(date +%s) - s )) s"
nvidia-smi dmon -s pc -d 1 -o T > /tmp/l/dmon.txt 2>&1 &
dm=$!
export ITERS=5 WARMUP=2 TORCH_MODES=compile TORCH_GPUS=1
OUT=/tmp/l/llama timeout 200 bash scripts/gpu_bench.sh build-gpu/bin bench/torch_llama.py configs/plans/llama3.2-1b-1gpu.json > /tmp/l/llama.log 2>&1
kill $dm
{
sed -n '/== summary/,$p' /tmp/l/llama.log
grep -E "iteration +[0-9]/" /tmp/l/llama.log | grep -v torch | sed 's/.*iteration \+\([0-9]\).*(ms): \([0-9.]*\).*lm loss: \([0-9.E+-]*\).*grad norm: \([0-9.]*\).*/it \1 \2 ms loss \3 gnorm \4/'
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
