#!/usr/bin/env bash
# in-kernel dQ finalize (finalizer warps, TMA stores): build; attention gpu tests; checks; racecheck/synccheck on the
# attention tests; attention bench x2; ncu of the backward's kernels; then HEAD's attention_hopper.cu + tma.cuh: bench x2
set -uo pipefail
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export MPLAN_EXEC_GOLDEN="$PWD/tests/exec/oracle/golden.json"
o=$OUT; mkdir -p $o/l; s=$(date +%s)
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMPLAN_WITH_GPU=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DMPLAN_BUILD_BENCH=OFF -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc > $o/l/cmake.log 2>&1
cmake --build build-gpu -j16 --target mplan_gpu_bench mplan_gpu_tests > $o/l/build.log 2>&1 || { tail -30 $o/l/build.log; exit 1; }
echo "built $(( $(date +%s) - s )) s"
b=build-gpu/exec/cuda/tools/mplan_gpu_bench
t=build-gpu/tests/exec/cuda/mplan_gpu_tests
timeout 120 $t --gtest_filter='*ttention*:*Golden*:*Llama*' > $o/gpu_tests_att.log 2>&1; echo "gpu tests rc $?"
grep -E "^\[  (FAILED|PASSED|SKIPPED) |tests ran" $o/gpu_tests_att.log | head -6
timeout 150 $b --checks-only > $o/checks.log 2>&1; echo "checks rc $?"; grep -E "^checks|FAIL" $o/checks.log | head -8
for i in 1 2; do timeout 60 $b --no-checks --only attention > $o/att-new-$i.log 2>&1; echo "== new $i"; grep "^attention" $o/att-new-$i.log | grep -v "reference\|mma.sync"; done
timeout 60 ncu --clock-control none -k regex:"dsum|hopper_bwd|hopper_dq_finalize" --launch-count 6 --section SpeedOfLight $b --no-checks --only attention --reps 1 > $o/ncu-bwd-parts.txt 2>&1; echo "ncu rc $?"
grep -E "dsum_bf16|hopper_bwd_kernel|Duration|DRAM Throughput" $o/ncu-bwd-parts.txt | sed 's/(CUtensorMap.*//' | head -16
for tool in synccheck racecheck; do
  timeout 100 compute-sanitizer --tool $tool $t --gtest_filter='AttentionTest.HeadDim128MatchesCpu:AttentionTest.SequenceLengthsOffTheTiles:AttentionTest.GroupedQueryMatchesCpu' > $o/san-$tool.log 2>&1; echo "$tool rc $?"; grep -E "ERROR SUMMARY|PASSED|FAILED" $o/san-$tool.log | head -4
done
cp carry/base/attention_hopper.cu exec/cuda/attention_hopper.cu; cp carry/base/tma.cuh exec/cuda/tma.cuh
cmake --build build-gpu -j16 --target mplan_gpu_bench > $o/l/build-base.log 2>&1 || { tail -30 $o/l/build-base.log; exit 1; }
for i in 1 2; do timeout 60 $b --no-checks --only attention > $o/att-base-$i.log 2>&1; echo "== base $i"; grep "^attention" $o/att-base-$i.log | grep -v "reference\|mma.sync"; done
echo "total $(( $(date +%s) - s )) s"
