#!/usr/bin/env bash
# Column sums (bias gradients) with 8 rows' loads in flight a thread: build; checks;
# the bias_grad bench rows for this tree (kBatch 8), kBatch 4 (carry/var) and c28d33a's
# reduce.cu (carry/base), each rebuilt into the same build; the GPT step (mplan alone) with this
# tree and with c28d33a's reduce.cu, alternating.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export MPLAN_EXEC_GOLDEN="$PWD/tests/exec/oracle/golden.json"
o=$OUT; s=$(date +%s)
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMPLAN_WITH_GPU=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DMPLAN_BUILD_BENCH=OFF -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc > /tmp/cmake.log 2>&1
cmake --build build-gpu -j16 --target mplan mplan_gpu_bench > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log; exit 1; }
mkdir -p /tmp/new/bin /tmp/base/bin; cp build-gpu/cli/mplan /tmp/new/bin/
echo "built $(( $(date +%s) - s )) s"
b=build-gpu/exec/cuda/tools/mplan_gpu_bench
timeout 150 $b --checks-only > $o/checks.log 2>&1; echo "checks rc $?"; grep -E "^checks|FAIL" $o/checks.log | head -8; grep "bias_grad rows=20000" $o/checks.log
bench() { timeout 90 $b --no-checks --only memory > $o/mem-$1.log 2>&1; grep -E "^bias_grad" $o/mem-$1.log | sed "s/^/$1: /"; }
bench b8
cp exec/cuda/reduce.cu /tmp/reduce_new.cu
cp carry/var/reduce_b4.cu exec/cuda/reduce.cu; cmake --build build-gpu -j16 --target mplan_gpu_bench > /tmp/b4.log 2>&1 || tail -5 /tmp/b4.log; bench b4
cp carry/base/reduce.cu exec/cuda/reduce.cu; cmake --build build-gpu -j16 --target mplan mplan_gpu_bench > /tmp/b0.log 2>&1 || tail -5 /tmp/b0.log; cp build-gpu/cli/mplan /tmp/base/bin/; bench base
cp /tmp/reduce_new.cu exec/cuda/reduce.cu
export ITERS=4 WARMUP=2 TRACE_LEVEL=ops
i=0
for r in new base new base; do
  i=$((i + 1)); n=gpt-$i-$r
  OUT=$o/$n bash scripts/gpu_bench.sh /tmp/$r/bin none configs/plans/gpt3-1.3b-1gpu.json > $o/$n.log 2>&1
  echo "$n: $(grep -E '^mplan gpt3' $o/$n.log)"
  python3 scripts/trace_top_ops.py $o/$n/trace-*.json 40 | grep -E "bias_grad|all spans" | sed "s/^/  $n /"
  rm -rf $o/$n
done
echo "total $(( $(date +%s) - s )) s"
