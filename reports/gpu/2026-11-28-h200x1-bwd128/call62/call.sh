#!/usr/bin/env bash
# This tree and, built beside it in the same call, 4370641's attention_hopper.cu (carried as
# carry/prev_attention_hopper.cu): the attention gpu tests of this tree; the attention bench of
# both, alternating; then the Llama model beside its PyTorch baseline.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
o=$OUT; mkdir -p /tmp/l; s=$(date +%s)
cfg="-G Ninja -DCMAKE_BUILD_TYPE=Release -DMPLAN_WITH_GPU=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DMPLAN_BUILD_BENCH=OFF -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc"
mkdir -p /tmp/prev && tar --exclude=./build-gpu --exclude=./carry --exclude=./.git -cf - . | tar -C /tmp/prev -xf -
cp carry/prev_attention_hopper.cu /tmp/prev/exec/cuda/attention_hopper.cu
cmake -S . -B build-gpu $cfg > /tmp/l/cmake.log 2>&1
cmake -S /tmp/prev -B /tmp/prev/build $cfg > /tmp/l/cmake-prev.log 2>&1
cmake --build build-gpu -j10 --target mplan mplan_gpu_bench mplan_gpu_tests > /tmp/l/build.log 2>&1 &
cmake --build /tmp/prev/build -j6 --target mplan_gpu_bench > /tmp/l/build-prev.log 2>&1 || { tail -30 /tmp/l/build-prev.log; exit 1; }
wait $! || { tail -30 /tmp/l/build.log; exit 1; }
mkdir -p build-gpu/bin; cp build-gpu/cli/mplan build-gpu/bin/
echo "built $(( $(date +%s) - s )) s"
timeout 120 build-gpu/tests/exec/cuda/mplan_gpu_tests --gtest_filter='Attention*' > /tmp/l/att_tests.log 2>&1; rc=$?
{ echo "attention gpu tests rc $rc"; grep -E "^\[  (FAILED|PASSED) |FAIL" /tmp/l/att_tests.log | head -20; } > $o/correctness.txt
cat $o/correctness.txt
[ $rc = 0 ] || exit 1
for r in 1 2; do
  for v in new prev; do
    b=build-gpu/exec/cuda/tools/mplan_gpu_bench; [ $v = prev ] && b=/tmp/prev/build/exec/cuda/tools/mplan_gpu_bench
    timeout 100 $b --no-checks --only attention > /tmp/l/att-$v-$r.log 2>&1
    grep -E "^ *attention (fwd|bwd) +b" /tmp/l/att-$v-$r.log | grep -v "mma.sync\|reference" | sed "s/^/$v-$r /" >> $o/bench.txt
  done
done
cat $o/bench.txt
echo "at $(( $(date +%s) - s )) s"
nvidia-smi dmon -s pc -d 1 -o T > /tmp/l/dmon.txt 2>&1 &
dm=$!
export ITERS=5 WARMUP=2 TORCH_MODES=compile TORCH_GPUS=1
OUT=/tmp/l/llama timeout 220 bash scripts/gpu_bench.sh build-gpu/bin bench/torch_llama.py configs/plans/llama3.2-1b-1gpu.json > /tmp/l/llama.log 2>&1
kill $dm
{
for m in llama; do echo "== $m"; sed -n '/== summary/,$p' /tmp/l/$m.log; grep -E "iteration +[0-9]/" /tmp/l/$m.log | grep -v torch | sed 's/.*iteration \+\([0-9]\).*(ms): \([0-9.]*\).*lm loss: \([0-9.E+-]*\).*grad norm: \([0-9.]*\).*/it \1 \2 ms loss \3 gnorm \4/'; done
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
