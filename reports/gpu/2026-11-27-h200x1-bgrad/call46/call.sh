#!/usr/bin/env bash
# Cross-entropy's three steps in one kernel at tensor parallel 1 (the row's second read from L2),
# the column sum (bias gradients) over parts of 256 rows with the next batch's loads in flight,
# SwiGLU's kernels four vectors a thread: build; every gpu test; checks; the memory bench with
# this tree's reduce.cu and llama_ops.cu and with the previous ones (carry/var), same build;
# GPT and Llama beside torch.compile (this tree's mplan).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export MPLAN_EXEC_GOLDEN="$PWD/tests/exec/oracle/golden.json"
o=$OUT; mkdir -p /tmp/l; s=$(date +%s)
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMPLAN_WITH_GPU=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DMPLAN_BUILD_BENCH=OFF -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc > /tmp/l/cmake.log 2>&1
cmake --build build-gpu -j16 --target mplan mplan_gpu_bench mplan_gpu_tests > /tmp/l/build.log 2>&1 || { tail -30 /tmp/l/build.log; exit 1; }
mkdir -p build-gpu/bin; cp build-gpu/cli/mplan build-gpu/bin/
echo "built $(( $(date +%s) - s )) s"
b=build-gpu/exec/cuda/tools/mplan_gpu_bench
{
timeout 150 build-gpu/tests/exec/cuda/mplan_gpu_tests > /tmp/l/gpu_tests.log 2>&1; echo "gpu tests rc $?"
grep -E "^\[  (FAILED|PASSED|SKIPPED) |tests ran" /tmp/l/gpu_tests.log | head
grep -E "CrossEntropyUnsplit|FAIL " /tmp/l/gpu_tests.log | head -6
timeout 150 $b --checks-only > /tmp/l/checks.log 2>&1; echo "checks rc $?"; grep -E "^checks|FAIL" /tmp/l/checks.log | head -12
grep -E "xent_unsplit|swiglu|bias_grad" /tmp/l/checks.log | cut -c1-150 | head -30
} > $o/correctness.txt 2>&1
cat $o/correctness.txt
cp exec/cuda/reduce.cu /tmp/reduce_tree.cu; cp exec/cuda/llama_ops.cu /tmp/llama_tree.cu
{
for v in tree head; do
  if [ $v = head ]; then
    cp carry/var/reduce_head.cu exec/cuda/reduce.cu; cp carry/var/llama_ops_head.cu exec/cuda/llama_ops.cu
    cmake --build build-gpu -j16 --target mplan_gpu_bench > /tmp/l/bv.log 2>&1 || { tail -5 /tmp/l/bv.log; continue; }
  fi
  timeout 120 $b --no-checks --only memory > /tmp/l/mem.log 2>&1
  echo "$v:"; grep -E "^(bias_grad|xent|swiglu|rmsnorm|sum )" /tmp/l/mem.log | sed "s/^/  /"
done
} > $o/bench.txt 2>&1
cat $o/bench.txt
cp /tmp/reduce_tree.cu exec/cuda/reduce.cu; cp /tmp/llama_tree.cu exec/cuda/llama_ops.cu
nvidia-smi dmon -s pc -d 1 -o T > /tmp/l/dmon.txt 2>&1 &
dm=$!
export ITERS=5 WARMUP=2 TORCH_MODES=compile TORCH_GPUS=1 TRACE_LEVEL=ops
OUT=/tmp/l/gpt timeout 200 bash scripts/gpu_bench.sh build-gpu/bin carry/torch_gpt.py configs/plans/gpt3-1.3b-1gpu.json > /tmp/l/gpt.log 2>&1
OUT=/tmp/l/llama timeout 200 bash scripts/gpu_bench.sh build-gpu/bin bench/torch_llama.py configs/plans/llama3.2-1b-1gpu.json > /tmp/l/llama.log 2>&1
kill $dm
{
for m in gpt llama; do sed -n '/== summary/,$p' /tmp/l/$m.log; grep -E "iteration +[0-9]/" /tmp/l/$m.log | grep -v torch | sed 's/.*iteration \+\([0-9]\).*(ms): \([0-9.]*\).*lm loss: \([0-9.E+-]*\).*grad norm: \([0-9.]*\).*/it \1 \2 ms loss \3 gnorm \4/'; done
for m in gpt llama; do echo "== ops $m"; python3 scripts/trace_top_ops.py /tmp/l/$m/trace-*.json 30; done
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
cp /tmp/l/gpu_tests.log /tmp/l/checks.log $o/ 2>/dev/null
