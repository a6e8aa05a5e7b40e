#!/usr/bin/env bash
# Head dim 64's backward with decoupled consumers (each its own dQ part over its 64 keys, consumer
# 1's added by consumer 0 through shared memory): build; every gpu test; checks; the attention
# bench with this tree and with the previous attention_hopper.cu (carry/var/attn_head.cu), each
# rebuilt into the same build, twice alternating.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export MPLAN_EXEC_GOLDEN="$PWD/tests/exec/oracle/golden.json"
o=$OUT; mkdir -p /tmp/l; s=$(date +%s)
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMPLAN_WITH_GPU=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DMPLAN_BUILD_BENCH=OFF -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc > /tmp/l/cmake.log 2>&1
cmake --build build-gpu -j16 --target mplan mplan_gpu_bench mplan_gpu_tests > /tmp/l/build.log 2>&1 || { tail -30 /tmp/l/build.log; exit 1; }
echo "built $(( $(date +%s) - s )) s"
b=build-gpu/exec/cuda/tools/mplan_gpu_bench
{
timeout 150 build-gpu/tests/exec/cuda/mplan_gpu_tests > /tmp/l/gpu_tests.log 2>&1; echo "gpu tests rc $?"
grep -E "^\[  (FAILED|PASSED|SKIPPED) |tests ran" /tmp/l/gpu_tests.log | head
timeout 150 $b --checks-only > /tmp/l/checks.log 2>&1; echo "checks rc $?"; grep -E "^checks|FAIL" /tmp/l/checks.log | head -12
grep -E "attention.*d=64|attention.*d64" /tmp/l/checks.log | head -8
} > $o/correctness.txt 2>&1
cat $o/correctness.txt
cp exec/cuda/attention_hopper.cu /tmp/attn_tree.cu
{
for v in tree base tree base; do
  if [ $v = tree ]; then cp /tmp/attn_tree.cu exec/cuda/attention_hopper.cu; else cp carry/var/attn_head.cu exec/cuda/attention_hopper.cu; fi
  cmake --build build-gpu -j16 --target mplan_gpu_bench > /tmp/l/bv.log 2>&1 || { tail -5 /tmp/l/bv.log; continue; }
  timeout 120 $b --no-checks --only attention > /tmp/l/attn.log 2>&1
  echo "$v:"; grep -E "^attention (fwd|bwd) +b" /tmp/l/attn.log | grep -v "mma.sync\|reference" | sed "s/^/  /"
done
} > $o/attention.txt 2>&1
cat $o/attention.txt
cp /tmp/attn_tree.cu exec/cuda/attention_hopper.cu
echo "total $(( $(date +%s) - s )) s"
cp /tmp/l/gpu_tests.log /tmp/l/checks.log $o/ 2>/dev/null
