#!/usr/bin/env bash
# dqfin2 (one-block-per-tile dQ finalize): build; every gpu test; checks; attention bench x2; ncu of the finalize;
# nsys timeline of the attention bench (gaps between the backward's kernels); then main's attention_hopper.cu: bench x2
set -uo pipefail
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export MPLAN_EXEC_GOLDEN="$PWD/tests/exec/oracle/golden.json"
o=$OUT; mkdir -p $o/l; s=$(date +%s)
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMPLAN_WITH_GPU=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DMPLAN_BUILD_BENCH=OFF -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc > $o/l/cmake.log 2>&1 || cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DMPLAN_WITH_GPU=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DMPLAN_BUILD_BENCH=OFF -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc > $o/l/cmake.log 2>&1
cmake --build build-gpu -j16 --target mplan_gpu_bench mplan_gpu_tests > $o/l/build.log 2>&1 || { tail -30 $o/l/build.log; exit 1; }
echo "built $(( $(date +%s) - s )) s"
b=build-gpu/exec/cuda/tools/mplan_gpu_bench
timeout 200 build-gpu/tests/exec/cuda/mplan_gpu_tests > $o/gpu_tests.log 2>&1; echo "gpu tests rc $?"
grep -E "^\[  (FAILED|PASSED|SKIPPED) |tests ran" $o/gpu_tests.log | head
timeout 150 $b --checks-only > $o/checks.log 2>&1; echo "checks rc $?"; grep -E "^checks|FAIL" $o/checks.log | head -8
for i in 1 2; do timeout 60 $b --no-checks --only attention > $o/att-new-$i.log 2>&1; echo "== new $i"; grep "^attention" $o/att-new-$i.log | grep -v "reference\|mma.sync"; done
timeout 60 ncu --clock-control none -k regex:"dsum|hopper_bwd|hopper_dq_finalize" --launch-count 9 --section SpeedOfLight $b --no-checks --only attention --reps 1 > $o/ncu-bwd-parts.txt 2>&1; echo "ncu rc $?"
grep -E "dsum_bf16|hopper_bwd_kernel|hopper_dq_finalize|Duration|DRAM Throughput" $o/ncu-bwd-parts.txt | sed 's/(CUtensorMap.*//' | head -30
ns=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -1)
echo "nsys: $ns"
if [ -n "$ns" ]; then
  timeout 90 $ns profile -t cuda -o $o/att-timeline -f true $b --no-checks --only attention --reps 3 > $o/nsys.log 2>&1; echo "nsys rc $?"
  timeout 60 $ns stats -r cuda_gpu_trace -f csv -o $o/att-trace $o/att-timeline.nsys-rep > $o/nsys-stats.log 2>&1; echo "nsys stats rc $?"
  rm -f $o/att-timeline.nsys-rep $o/att-timeline.sqlite
  ls -la $o/ | grep trace
fi
cp carry/base/attention_hopper.cu exec/cuda/attention_hopper.cu
cmake --build build-gpu -j16 --target mplan_gpu_bench > $o/l/build-base.log 2>&1 || { tail -30 $o/l/build-base.log; exit 1; }
for i in 1 2; do timeout 60 $b --no-checks --only attention > $o/att-base-$i.log 2>&1; echo "== base $i"; grep "^attention" $o/att-base-$i.log | grep -v "reference\|mma.sync"; done
echo "total $(( $(date +%s) - s )) s"
