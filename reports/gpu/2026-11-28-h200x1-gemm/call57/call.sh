#!/usr/bin/env bash
# GEMM algorithms tuned under sustained load (MPLAN_GEMM_TUNE=1, written to MPLAN_GEMM_ALGOS'
# file) for the Llama model: build; the GEMM gpu tests; one tuning run; then the model with the
# heuristic's choices, torch.compile, and the model with the file's choices, in one call.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
o=$OUT; mkdir -p /tmp/l; s=$(date +%s)
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMPLAN_WITH_GPU=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DMPLAN_BUILD_BENCH=OFF -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc > /tmp/l/cmake.log 2>&1
cmake --build build-gpu -j16 --target mplan mplan_gpu_tests > /tmp/l/build.log 2>&1 || { tail -30 /tmp/l/build.log; exit 1; }
mkdir -p build-gpu/bin; cp build-gpu/cli/mplan build-gpu/bin/
echo "built $(( $(date +%s) - s )) s"
{
timeout 120 build-gpu/tests/exec/cuda/mplan_gpu_tests --gtest_filter='GemmLt*' > /tmp/l/gpu_tests.log 2>&1; echo "gemm gpu tests rc $?"
grep -E "^\[  (FAILED|PASSED|SKIPPED|      OK) |tests ran|Failure" /tmp/l/gpu_tests.log | head -20
} > $o/correctness.txt 2>&1
cat $o/correctness.txt
plan=configs/plans/llama3.2-1b-1gpu.json
algos=$o/llama-gemm-algos.json
t=$(date +%s)
MPLAN_GEMM_TUNE=1 MPLAN_GEMM_ALGOS=$algos timeout 200 mpirun -np 1 -x NCCL_NVLS_ENABLE -x MPLAN_GEMM_TUNE -x MPLAN_GEMM_ALGOS build-gpu/bin/mplan run $plan --iters 2 --warmup 1 > $o/tune-llama.log 2>&1
echo "tune run rc $? in $(( $(date +%s) - t )) s"; grep "mplan: gemm" $o/tune-llama.log
nvidia-smi dmon -s pc -d 1 -o T > /tmp/l/dmon.txt 2>&1 &
dm=$!
export ITERS=5 WARMUP=2 TORCH_MODES=compile TORCH_GPUS=1
OUT=/tmp/l/base timeout 250 bash scripts/gpu_bench.sh build-gpu/bin bench/torch_llama.py $plan > /tmp/l/base.log 2>&1
MPLAN_GEMM_ALGOS=$algos OUT=/tmp/l/algos timeout 100 bash scripts/gpu_bench.sh build-gpu/bin none $plan > /tmp/l/algos.log 2>&1
kill $dm
{
for m in base algos; do echo "== $m"; sed -n '/== summary/,$p' /tmp/l/$m.log; grep -E "iteration +[0-9]/" /tmp/l/$m.log | grep -v torch | sed 's/.*iteration \+\([0-9]\).*(ms): \([0-9.]*\).*lm loss: \([0-9.E+-]*\).*grad norm: \([0-9.]*\).*/it \1 \2 ms loss \3 gnorm \4/'; grep -i "MPLAN_GEMM\|warn" /tmp/l/$m.log | head -3; done
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
