#!/usr/bin/env bash
# Measures, on a host of NVIDIA H200 GPUs, what the h200x4 hardware profile is calibrated from:
# GEMM / flash-attention / memory-bound rates on one GPU (compute_sweep.py, PyTorch) and NCCL
# collectives on 2 and 4 GPUs (nccl-tests, built here from the source directory given).
# Usage: scripts/calibrate/h200_calibration.sh NCCL_TESTS_SRC_DIR   (results under $OUT)
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$1" && pwd)
out=${OUT:-$PWD/calib-out}
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv >"$out/gpus.txt"
nvidia-smi topo -m >>"$out/gpus.txt" 2>&1

# nccl-tests against the system NCCL, or the one PyTorch ships.
nccl_home=/usr
if [ ! -f /usr/include/nccl.h ]; then
  pkg=$(python3 -c "import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__))")
  nccl_home=/tmp/nccl
  mkdir -p $nccl_home/lib
  ln -sf "$pkg/include" $nccl_home/include
  ln -sf "$pkg"/lib/libnccl.so.2 $nccl_home/lib/libnccl.so
  ln -sf "$pkg"/lib/libnccl.so.2 $nccl_home/lib/libnccl.so.2
fi
export LD_LIBRARY_PATH=$nccl_home/lib:${LD_LIBRARY_PATH:-}
(cd "$src/src" && make -j 32 build BUILDDIR=/tmp/nccl-tests NCCL_HOME=$nccl_home \
   NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" >"$out/nccl_build.log" 2>&1) &
build_pid=$!

python3 -u "$here/compute_sweep.py" >"$out/compute.json" 2>"$out/compute.log"

wait $build_pid || { echo "nccl-tests build failed"; tail -20 "$out/nccl_build.log"; }
{
  for g in 2 4; do
    for t in all_reduce all_gather reduce_scatter alltoall sendrecv; do
      echo "### $t g=$g"
      /tmp/nccl-tests/${t}_perf -b 8 -e 1G -f 2 -g $g -w 5 -n 20 2>&1 | grep -v "^#  Rank"
    done
  done
} >"$out/nccl.txt" 2>&1
grep -E "^###|Avg bus" "$out/nccl.txt"
python3 - "$out/compute.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["gemm"]:
    if r["kind"] == "square": print("gemm %5d^3 %6.0f TFLOP/s" % (r["m"], r["tflops"]))
for r in d["memory_bound"]: print("%-22s %6.0f GB/s" % (r["op"], r["gbps"]))
PY
