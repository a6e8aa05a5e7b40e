#!/usr/bin/env bash
# Where the head-dim-64 kernels stall, by SASS instruction: Nsight Compute's warp-state sampling on
# the first launch of each (b4 s2048 h32 d64), the source page exported as CSV and the 40 lines
# with the most samples kept.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
o=$OUT; s=$(date +%s)
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMPLAN_WITH_GPU=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DMPLAN_BUILD_BENCH=OFF -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc > /tmp/cmake.log 2>&1
cmake --build build-gpu -j16 --target mplan_gpu_bench > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log; exit 1; }
echo "built $(( $(date +%s) - s )) s"
b=build-gpu/exec/cuda/tools/mplan_gpu_bench
ncu=/usr/local/cuda/bin/ncu; [ -x $ncu ] || ncu=$(command -v ncu)
for k in fwd bwd; do
  timeout 200 $ncu -f -o /tmp/$k --import-source yes --kernel-name-base demangled -k "regex:hopper_${k}_kernel<\(int\)64>" --launch-count 1 --section WarpStateStats --section SourceCounters --section SpeedOfLight $b --no-checks --only attention > /tmp/$k.log 2>&1
  echo "ncu $k rc $?"
  $ncu -i /tmp/$k.ncu-rep --page source --csv --print-source sass > /tmp/$k-src.csv 2> /tmp/$k-src.err
  echo "source page rc $? $(wc -l < /tmp/$k-src.csv) lines"; head -c 600 /tmp/$k-src.err
  python3 - /tmp/$k-src.csv > $o/stalls-$k.txt <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1], newline='')))
hdr = None
for i, r in enumerate(rows):
    if any('Sampling' in c for c in r):
        hdr, body = r, rows[i + 1:]
        break
if hdr is None:
    print("no sampling column; header candidates:", rows[:3]); sys.exit()
print(" | ".join(hdr))
col = next(j for j, c in enumerate(hdr) if 'Warp Stall Sampling (All' in c)
def num(x):
    try: return float(x.replace(',', ''))
    except ValueError: return 0.0
tot = sum(num(r[col]) for r in body if len(r) > col)
print("total samples", tot)
for r in sorted((r for r in body if len(r) > col), key=lambda r: -num(r[col]))[:40]:
    print(f"{100 * num(r[col]) / max(tot, 1):5.1f}%", " | ".join(c.strip()[:110] for c in r))
PY
  head -5 $o/stalls-$k.txt | cut -c1-300
  cp /tmp/$k.log $o/ncu-$k.log
done
echo "total $(( $(date +%s) - s )) s"
