#!/usr/bin/env bash
# The column finalize with 16 loads in flight a lane: build; every gpu test (the tuning test's new
# check); checks; the memory bench with this tree's reduce.cu and with b9bf2a4's (carry/base),
# rebuilt into the same build. Then head-dim-64 attention variants, each rebuilt into the same
# build and timed by the attention bench: this tree; the backward's second warpgroup arriving at
# the dS exchange instead of waiting (decouple); a quarter / a half of the forward's exponentials
# by a polynomial (poly4, poly2); a diagnostic backward whose dQ writer neither waits nor copies.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export MPLAN_EXEC_GOLDEN="$PWD/tests/exec/oracle/golden.json"
o=$OUT; s=$(date +%s)
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMPLAN_WITH_GPU=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DMPLAN_BUILD_BENCH=OFF -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc > /tmp/cmake.log 2>&1
cmake --build build-gpu -j16 --target mplan mplan_gpu_bench mplan_gpu_tests > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log; exit 1; }
echo "built $(( $(date +%s) - s )) s"
b=build-gpu/exec/cuda/tools/mplan_gpu_bench
timeout 150 build-gpu/tests/exec/cuda/mplan_gpu_tests > $o/gpu_tests.log 2>&1; echo "gpu tests rc $?"
grep -E "^\[  (FAILED|PASSED|SKIPPED) |tests ran|TunedAlgorithms" $o/gpu_tests.log | head
timeout 150 $b --checks-only > $o/checks.log 2>&1; echo "checks rc $?"; grep -E "^checks|FAIL" $o/checks.log | head -12
mem() { timeout 90 $b --no-checks --only memory > $o/mem-$1.log 2>&1; grep -E "^(layernorm bwd|rmsnorm bwd|bias_grad)" $o/mem-$1.log | sed "s/^/$1: /"; }
mem new
cp exec/cuda/reduce.cu /tmp/reduce_new.cu; cp carry/base/reduce.cu exec/cuda/reduce.cu
cmake --build build-gpu -j16 --target mplan_gpu_bench > /tmp/b0.log 2>&1 || tail -5 /tmp/b0.log; mem base
cp /tmp/reduce_new.cu exec/cuda/reduce.cu
cmake --build build-gpu -j16 --target mplan_gpu_bench > /tmp/b1.log 2>&1 || tail -5 /tmp/b1.log; mem new2
cp exec/cuda/attention_hopper.cu /tmp/attn_tree.cu
for v in tree decouple poly4 poly2 nodq tree2; do
  case $v in tree|tree2) cp /tmp/attn_tree.cu exec/cuda/attention_hopper.cu ;; *) cp carry/var/attn_$v.cu exec/cuda/attention_hopper.cu ;; esac
  t0=$(date +%s); cmake --build build-gpu -j16 --target mplan_gpu_bench > /tmp/bv.log 2>&1 || { tail -5 /tmp/bv.log; continue; }
  timeout 120 $b --no-checks --only attention > $o/attn-$v.log 2>&1
  echo "$v (rebuilt in $(( $(date +%s) - t0 )) s):"
  case $v in decouple|poly4|poly2) timeout 100 $b --checks-only > $o/checks-$v.log 2>&1; echo "  checks rc $?: $(grep -E '^checks' $o/checks-$v.log)"; grep -E "FAIL" $o/checks-$v.log | head -5 ;; esac
  grep -E "^attention (fwd|bwd) +b" $o/attn-$v.log | grep -v "mma.sync\|reference" | sed "s/^/  /"
done
cp /tmp/attn_tree.cu exec/cuda/attention_hopper.cu
echo "total $(( $(date +%s) - s )) s"
