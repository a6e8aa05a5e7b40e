#!/usr/bin/env bash
# Nsight Compute on the head-dim-64 attention kernels of this tree (two consumer warpgroups):
# the first launch of each at b4 s2048 h32 d64, then the first at the Llama shape
# (b2 s4096 h32 g8 d64: the third launch of each, after b4 s2048's warm-up and timed runs is not
# countable ahead, so by its grid: 132 blocks either way; the first launch stands for both).
set -uo pipefail
export NCCL_NVLS_ENABLE=0
o=$OUT; s=$(date +%s)
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMPLAN_WITH_GPU=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DMPLAN_BUILD_BENCH=OFF -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc > /tmp/cmake.log 2>&1
cmake --build build-gpu -j16 --target mplan_gpu_bench > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log; exit 1; }
echo "built $(( $(date +%s) - s )) s"
b=build-gpu/exec/cuda/tools/mplan_gpu_bench
ncu=/usr/local/cuda/bin/ncu; [ -x $ncu ] || ncu=$(command -v ncu)
for k in fwd bwd; do
  timeout 200 $ncu --kernel-name-base demangled -k "regex:hopper_${k}_kernel<\(int\)64>" --launch-count 1 --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section InstructionStats --section Occupancy $b --no-checks --only attention > $o/ncu-$k.txt 2>&1
  echo "ncu $k rc $?: $(grep -c . $o/ncu-$k.txt) lines"
  grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|Issue Slots Busy|Issued Warp|No Eligible|Active Warps Per Scheduler|Eligible Warps|Shared Memory|L1/TEX Hit|Executed Ipc|Warp Cycles Per Issued" $o/ncu-$k.txt | head -30
done
echo "total $(( $(date +%s) - s )) s"
