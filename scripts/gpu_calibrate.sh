#!/usr/bin/env bash
# One call on a lent GPU machine, under 9 minutes: build mplan (Release, sm_90) outside the
# checkout as scripts/gpu_session.sh does, `mplan calibrate` (quick by default) on NP GPUs of this
# host, then optionally the accuracy runs (scripts/gpu_accuracy.sh) against the new profile.
# Everything lands in $OUT (default calibrate-out/): profile.json, calibrate.log, the accuracy
# tables, and gpu-calibrate.tgz with every log.
# Usage: scripts/gpu_calibrate.sh [--full|--quick] [--np N] [--base PROFILE] [--name NAME]
#        [--model M]... [PLAN.json...]
# Env: ITERS (default 10), WARMUP (3) for the accuracy runs, which stop starting plans when the
# 9 minutes run short (the table then covers those done). The plans' own shapes are calibrated.
set -uo pipefail
cd "$(dirname "$0")/.."
mode=--quick np=1
extra=()
while [ $# -gt 0 ]; do
  case $1 in
    --full) mode=""; shift ;;
    --quick) mode=--quick; shift ;;
    --np) np=$2; shift 2 ;;
    --base|--name|--model) extra+=("$1" "$2"); shift 2 ;;
    -*) echo "gpu_calibrate.sh: unknown option $1 (--full, --quick, --np, --base, --name, --model)" >&2
        exit 2 ;;
    *) break ;;
  esac
done
out=${OUT:-calibrate-out}
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d)
. scripts/gpu_env.sh
start=$(date +%s)
GPU_BUILD_CMAKE_ARGS=-DMPLAN_BUILD_TESTS=OFF GPU_BUILD_TIMEOUT=300 \
  gpu_build "$work/build" "$out" mplan || exit 1
bin="$work/bin"
mkdir -p "$bin"
cp "$work/build/cli/mplan" "$bin/"
echo "built in $(( $(date +%s) - start )) s at revision $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv >"$out/gpus.txt" 2>&1
limit=$([ -z "$mode" ] && echo 330 || echo 120)
plans=()
for p in "$@"; do plans+=(--plan "$p"); done  # the checked plans' own shapes are measured too
timeout "$limit" mpirun --oversubscribe --bind-to none -np "$np" -x NCCL_NVLS_ENABLE \
  "$bin/mplan" calibrate $mode --out "$out/profile.json" "${extra[@]}" "${plans[@]}" 2>&1 |
  tee "$out/calibrate.log"
status=${PIPESTATUS[0]}
echo "calibrate: exit $status after $(( $(date +%s) - start )) s"
left=$(( 520 - ($(date +%s) - start) ))
if [ "$status" = 0 ] && [ $# -gt 0 ]; then
  if [ "$left" -lt 60 ]; then
    echo "accuracy runs skipped: only $left s left of the 9 minutes"
    status=1
  else
    ITERS=${ITERS:-10} WARMUP=${WARMUP:-3} OUT="$out/accuracy" DEADLINE=$(( start + 520 )) \
      timeout "$left" bash scripts/gpu_accuracy.sh "$bin" --cluster "$out/profile.json" "$@" ||
      status=1
  fi
fi
tar czf "$out/gpu-calibrate.tgz" -C "$out" --exclude gpu-calibrate.tgz . 2>/dev/null
echo "total $(( $(date +%s) - start )) s"
exit $status
