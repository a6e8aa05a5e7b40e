#!/usr/bin/env bash
# Where the fused column sums cost (call 51: the backward 0.421 -> 0.451 ms with them): a timing
# knob (MPLAN_COLSUM_VARIANT, not kept) turns off the consumers' dK/dV sums ("q"), the finalizer's
# dQ sums ("kv") or both ("none"; the finalize kernel still runs); then the same with the producer
# warpgroup at 32 registers and the consumers at 232 (the finalizer's spills gone).
set -uo pipefail
export NCCL_NVLS_ENABLE=0
o=$OUT; mkdir -p /tmp/l; s=$(date +%s)
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMPLAN_WITH_GPU=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DMPLAN_BUILD_BENCH=OFF -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc > /tmp/l/cmake.log 2>&1
cmake --build build-gpu -j16 --target mplan_gpu_bench > /tmp/l/build.log 2>&1 || { tail -30 /tmp/l/build.log; exit 1; }
echo "built $(( $(date +%s) - s )) s"
b=build-gpu/exec/cuda/tools/mplan_gpu_bench
run() {  # $1 registers tag, $2 variant
  MPLAN_COLSUM_VARIANT=$2 timeout 100 $b --no-checks --only attention > /tmp/l/att-$1-$2.log 2>&1
  echo "== registers $1, $2"; grep -E "^ *(attention bwd|bias_grad)" /tmp/l/att-$1-$2.log | grep -v "kernels)" | grep -v timed
}
{
for v in both q kv none; do run 24-240 $v; done
python3 - <<'PY'
p = "exec/cuda/attention_hopper.cu"
s = open(p).read()
i = s.index("hopper_bwd_kernel(const __grid_constant__")
t = s[i:].replace("setmaxnreg_dec<24>", "setmaxnreg_dec<32>", 1).replace("setmaxnreg_inc<240>", "setmaxnreg_inc<232>", 1)
open(p, "w").write(s[:i] + t)
PY
grep -n "setmaxnreg" exec/cuda/attention_hopper.cu
cmake --build build-gpu -j16 --target mplan_gpu_bench > /tmp/l/build2.log 2>&1 || { tail -30 /tmp/l/build2.log; exit 1; }
for v in both none; do run 32-232 $v; done
echo "total $(( $(date +%s) - s )) s"
} > $o/bench.txt 2>&1
cat $o/bench.txt
