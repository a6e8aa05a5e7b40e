#!/usr/bin/env bash
# RoPE's backward folded with its angles on the MUFU, cross-entropy in one kernel (a cluster per
# row), SwiGLU's sigmoid on the MUFU: build; the attention and backend gpu tests and every op
# check; the attention bench and the memory-bound bench; Llama beside its PyTorch baseline at
# trace level ops, then Llama alone with RoPE's backward as its own kernel (MPLAN_NO_ROPE_FOLD=1),
# with the GPU's power and SM clock.
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
timeout 150 build-gpu/tests/exec/cuda/mplan_gpu_tests --gtest_filter='Attention*:CudaBackend*' > /tmp/l/gpu_tests.log 2>&1; rc=$?; echo "gpu tests rc $rc"; [ $rc = 0 ] || ok=0
grep -E "^\[  (FAILED|PASSED|SKIPPED) |tests ran|fold vs" /tmp/l/gpu_tests.log | head
grep -E "FAIL" /tmp/l/gpu_tests.log | head -8
timeout 150 $b --checks-only > /tmp/l/checks.log 2>&1; rc=$?; echo "checks rc $rc"; [ $rc = 0 ] || ok=0
grep -E "^checks|FAIL" /tmp/l/checks.log | head -12
grep -E "rope|xent|cross" /tmp/l/checks.log | cut -c1-150 | head -30
} > $o/correctness.txt 2>&1
cat $o/correctness.txt
[ $ok = 1 ] || exit 1
echo "at $(( $(date +%s) - s )) s"
timeout 100 $b --no-checks --only attention > /tmp/l/att.log 2>&1
grep -E "^ *attention" /tmp/l/att.log | grep -v timed > $o/bench.txt 2>&1
timeout 100 $b --no-checks --only memory > /tmp/l/mem.log 2>&1
grep -E "swiglu|xent|rope" /tmp/l/mem.log >> $o/bench.txt 2>&1
cat $o/bench.txt
echo "at $(( $(date +%s) - s )) s"
nvidia-smi dmon -s pc -d 1 -o T > /tmp/l/dmon.txt 2>&1 &
dm=$!
export ITERS=5 WARMUP=2 TORCH_MODES=compile TORCH_GPUS=1
OUT=$o/llama TRACE_LEVEL=ops timeout 200 bash scripts/gpu_bench.sh build-gpu/bin bench/torch_llama.py configs/plans/llama3.2-1b-1gpu.json > /tmp/l/llama.log 2>&1
OUT=$o/llama-nofold TRACE_LEVEL=ops MPLAN_NO_ROPE_FOLD=1 timeout 120 bash scripts/gpu_bench.sh build-gpu/bin none configs/plans/llama3.2-1b-1gpu.json > /tmp/l/llama-nofold.log 2>&1
kill $dm
{
for m in llama llama-nofold; do echo "== $m"; sed -n '/== summary/,$p' /tmp/l/$m.log; grep -E "iteration +[0-9]/" /tmp/l/$m.log | grep -v torch | sed 's/.*iteration \+\([0-9]\).*(ms): \([0-9.]*\).*lm loss: \([0-9.E+-]*\).*grad norm: \([0-9.]*\).*/it \1 \2 ms loss \3 gnorm \4/'; done
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
for f in $o/llama/trace-*.json $o/llama-nofold/trace-*.json; do [ -f "$f" ] && python3 scripts/trace_top_ops.py "$f" | head -34 && gzip -9 "$f"; done
echo "total $(( $(date +%s) - s )) s"
} > $o/models.txt 2>&1
cat $o/models.txt
