#!/usr/bin/env bash
# A share of the attention's exponentials by a polynomial (MPLAN_ATTN_POLY_FWD / _BWD, eighths):
# the attention gpu tests at 0, 3 and 4; the attention bench at 0, 2, 3, 4 (twice, alternating);
# the Llama model alone at 0, 3, 4, then its PyTorch baseline.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
o=$OUT; mkdir -p /tmp/l; s=$(date +%s)
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMPLAN_WITH_GPU=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DMPLAN_BUILD_BENCH=OFF -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc > /tmp/l/cmake.log 2>&1
cmake --build build-gpu -j16 --target mplan mplan_gpu_bench mplan_gpu_tests > /tmp/l/build.log 2>&1 || { tail -30 /tmp/l/build.log; exit 1; }
mkdir -p build-gpu/bin; cp build-gpu/cli/mplan build-gpu/bin/
echo "built $(( $(date +%s) - s )) s"
ok=1
for p in 0 3 4; do
  MPLAN_ATTN_POLY_FWD=$p MPLAN_ATTN_POLY_BWD=$p timeout 120 build-gpu/tests/exec/cuda/mplan_gpu_tests --gtest_filter='Attention*' > /tmp/l/att_tests_$p.log 2>&1; rc=$?
  echo "poly $p: attention gpu tests rc $rc $(grep -cE '^\[       OK' /tmp/l/att_tests_$p.log) ok"; grep -E "^\[  FAILED|FAIL " /tmp/l/att_tests_$p.log | head -5
  [ $rc = 0 ] || ok=0
done > $o/correctness.txt 2>&1
cat $o/correctness.txt
b=build-gpu/exec/cuda/tools/mplan_gpu_bench
for r in 1 2; do
  for p in 0 2 3 4; do
    MPLAN_ATTN_POLY_FWD=$p MPLAN_ATTN_POLY_BWD=$p timeout 100 $b --no-checks --only attention > /tmp/l/att-$p-$r.log 2>&1
    grep -E "^ *attention (fwd|bwd) +b" /tmp/l/att-$p-$r.log | grep -v "mma.sync\|reference" | sed "s/^/poly$p-$r /" >> $o/bench.txt
  done
done
cat $o/bench.txt
echo "at $(( $(date +%s) - s )) s"
[ $ok = 1 ] || exit 1
export ITERS=5 WARMUP=2 TORCH_MODES=compile TORCH_GPUS=1
for p in 0 3 4; do
  MPLAN_ATTN_POLY_FWD=$p MPLAN_ATTN_POLY_BWD=$p OUT=/tmp/l/llama-$p timeout 120 bash scripts/gpu_bench.sh build-gpu/bin none configs/plans/llama3.2-1b-1gpu.json > /tmp/l/llama-$p.log 2>&1
  { echo "== poly $p"; sed -n '/== summary/,$p' /tmp/l/llama-$p.log | sed -n 3p; grep -E "iteration +[0-9]/" /tmp/l/llama-$p.log | sed 's/.*iteration \+\([0-9]\).*(ms): \([0-9.]*\).*lm loss: \([0-9.E+-]*\).*grad norm: \([0-9.]*\).*/it \1 \2 ms loss \3 gnorm \4/'; } >> $o/models.txt
done
OUT=/tmp/l/torch timeout 200 bash scripts/gpu_bench.sh build-gpu/bin bench/torch_llama.py > /tmp/l/torch.log 2>&1
sed -n '/== summary/,$p' /tmp/l/torch.log | grep torch_ >> $o/models.txt
echo "total $(( $(date +%s) - s )) s" >> $o/models.txt
cat $o/models.txt
