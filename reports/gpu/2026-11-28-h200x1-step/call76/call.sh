#!/usr/bin/env bash
# Cross-entropy's fused kernel with the softmax scale folded into the exponent (one FMA and the
# MUFU an element), the target handled per vector, the row max on bf16 pairs; the host's step
# clock (MPLAN_STEP_CLOCK=1). Build; every gpu test and the op checks; the memory-bound bench
# twice (cross-entropy lines); Llama beside its PyTorch baseline with the step clock.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export MPLAN_EXEC_GOLDEN="$PWD/tests/exec/oracle/golden.json"
o=$OUT; mkdir -p /tmp/l; s=$(date +%s)
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMPLAN_WITH_GPU=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DMPLAN_BUILD_BENCH=OFF -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc > /tmp/l/cmake.log 2>&1
cmake --build build-gpu -j16 --target mplan mplan_gpu_bench mplan_gpu_tests > /tmp/l/build.log 2>&1 || { tail -30 /tmp/l/build.log; exit 1; }
mkdir -p build-gpu/bin; cp build-gpu/cli/mplan build-gpu/bin/
echo "built $(( $(date +%s) - s )) s"
b=build-gpu/exec/cuda/tools/mplan_gpu_bench
ok=1
{
timeout 150 build-gpu/tests/exec/cuda/mplan_gpu_tests > /tmp/l/gpu_tests.log 2>&1; rc=$?; echo "gpu tests rc $rc"; [ $rc = 0 ] || ok=0
grep -E "^\[  (FAILED|PASSED|SKIPPED) |tests ran" /tmp/l/gpu_tests.log | head
grep -E "FAIL" /tmp/l/gpu_tests.log | head -8
timeout 150 $b --checks-only > /tmp/l/checks.log 2>&1; rc=$?; echo "checks rc $rc"; [ $rc = 0 ] || ok=0
grep -E "^checks|FAIL" /tmp/l/checks.log | head -12
grep -E "xent|cross" /tmp/l/checks.log | cut -c1-150 | head -30
} > $o/correctness.txt 2>&1
cat $o/correctness.txt
echo "correctness ok=$ok"
for rep in 1 2; do
timeout 100 $b --no-checks --only memory > /tmp/l/mem$rep.log 2>&1
grep -E "^xent" /tmp/l/mem$rep.log
done > $o/bench.txt
cat $o/bench.txt
echo "at $(( $(date +%s) - s )) s"
nvidia-smi dmon -s pc -d 1 -o T > /tmp/l/dmon.txt 2>&1 &
dm=$!
export ITERS=5 WARMUP=2 TORCH_MODES=compile TORCH_GPUS=1 MPLAN_STEP_CLOCK=1
OUT=/tmp/l/llama timeout 200 bash scripts/gpu_bench.sh build-gpu/bin bench/torch_llama.py configs/plans/llama3.2-1b-1gpu.json > /tmp/l/llama.log 2>&1
kill $dm
{
for m in llama; do echo "== $m"; sed -n '/== summary/,$p' /tmp/l/$m.log; grep -E "iteration +[0-9]/" /tmp/l/$m.log | grep -v torch | sed 's/.*iteration \+\([0-9]\).*(ms): \([0-9.]*\).*lm loss: \([0-9.E+-]*\).*grad norm: \([0-9.]*\).*/it \1 \2 ms loss \3 gnorm \4/'; grep -rh "step clock" /tmp/l/$m.log /tmp/l/$m 2>/dev/null | head -12; done
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
