#!/usr/bin/env bash
# The final tree: build; the iteration-graph, resume and backend gpu tests (the new
# IterationGraphGpu test: tiny GPT and tiny Llama, graphs against direct iterations, bit for bit);
# Llama beside its PyTorch baseline (the iteration graphs on, as by default for one rank).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export MPLAN_EXEC_GOLDEN="$PWD/tests/exec/oracle/golden.json"
o=$OUT; mkdir -p /tmp/l; s=$(date +%s)
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMPLAN_WITH_GPU=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DMPLAN_BUILD_BENCH=OFF -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc > /tmp/l/cmake.log 2>&1
cmake --build build-gpu -j16 --target mplan mplan_gpu_tests > /tmp/l/build.log 2>&1 || { tail -30 /tmp/l/build.log; exit 1; }
mkdir -p build-gpu/bin; cp build-gpu/cli/mplan build-gpu/bin/
echo "built $(( $(date +%s) - s )) s"
{
timeout 200 build-gpu/tests/exec/cuda/mplan_gpu_tests --gtest_filter="IterationGraphGpu.*:ResumeGpu.*:CudaBackendTest.*" > /tmp/l/gpu_tests.log 2>&1; echo "gpu tests rc $?"
grep -E "^\[  (FAILED|PASSED|SKIPPED) |tests ran" /tmp/l/gpu_tests.log | head
grep -E "FAIL|Failure" -A3 /tmp/l/gpu_tests.log | head -30
grep -E "^\[       OK \] (IterationGraph|ResumeGpu|CudaBackendTest.Graphs)" /tmp/l/gpu_tests.log
} > $o/correctness.txt 2>&1
cat $o/correctness.txt
echo "at $(( $(date +%s) - s )) s"
nvidia-smi dmon -s pc -d 1 -o T > /tmp/l/dmon.txt 2>&1 &
dm=$!
export ITERS=5 WARMUP=2 TORCH_MODES=compile TORCH_GPUS=1
OUT=/tmp/l/llama timeout 200 bash scripts/gpu_bench.sh build-gpu/bin bench/torch_llama.py configs/plans/llama3.2-1b-1gpu.json > /tmp/l/llama.log 2>&1
kill $dm
{
for m in llama; do echo "== $m"; sed -n '/== summary/,$p' /tmp/l/$m.log; grep -E "iteration +[0-9]/" /tmp/l/$m.log | grep -v torch | sed 's/.*iteration \+\([0-9]\).*(ms): \([0-9.]*\).*lm loss: \([0-9.E+-]*\).*grad norm: \([0-9.]*\).*/it \1 \2 ms loss \3 gnorm \4/'; grep -h "graphs\|rror" /tmp/l/$m.log | head -4; done
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
