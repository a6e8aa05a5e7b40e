#!/usr/bin/env bash
# One call on a lent GPU machine: build (Release, sm_90, -j 16) outside the checkout, run the GPU
# checks and tests (exec/cuda/tools/run_gpu_checks.sh) and `mplan run` on each plan given
# (scripts/gpu_bench.sh: measured beside predicted, traces), then pack every log into one archive
# in $OUT (the device tool returns few files). Exit status: that of the checks.
# Usage: scripts/gpu_session.sh [--no-checks] [--bench TORCH_SCRIPT|none:PLAN.json,...]...
#        [--torch SCRIPT] [PLAN.json...]
# Each --bench runs its plans and its PyTorch baseline in one scripts/gpu_bench.sh call.
# Env: ITERS, WARMUP, TORCH_MODES, TORCH_GPUS as scripts/gpu_bench.sh reads them.
set -uo pipefail
cd "$(dirname "$0")/.."
checks=1 torch=none
benches=()
while [ $# -gt 0 ]; do
  case $1 in
    --no-checks) checks=0; shift ;;
    --torch) torch=$2; shift 2 ;;
    --bench) benches+=("$2"); shift 2 ;;
    *) break ;;
  esac
done
out=${OUT:-gpu-session}
work=$(mktemp -d)
. scripts/gpu_env.sh
mkdir -p "$work/logs"
start=$(date +%s)
gpu_build "$work/build" "$work/logs" mplan mplan_gpu_bench mplan_gpu_tests mplan_gpu_mpi_tests ||
  exit 1
bin="$work/bin"
mkdir -p "$bin"
cp "$work/build/cli/mplan" "$work/build/exec/cuda/tools/mplan_gpu_bench" \
   "$work/build/tests/exec/cuda/mplan_gpu_tests" "$work/build/tests/exec/cuda/mplan_gpu_mpi_tests" "$bin/"
echo "built in $(( $(date +%s) - start )) s at revision $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
status=0
if [ "$checks" = 1 ]; then
  OUT="$work/logs/checks" bash exec/cuda/tools/run_gpu_checks.sh "$bin" || status=1
fi
if [ $# -gt 0 ]; then
  OUT="$work/logs/runs" bash scripts/gpu_bench.sh "$bin" "$torch" "$@"
fi
for b in "${benches[@]}"; do
  IFS=, read -r -a plans <<<"${b#*:}"
  OUT="$work/logs/runs" bash scripts/gpu_bench.sh "$bin" "${b%%:*}" "${plans[@]}"
done
mkdir -p "$out"
tar czf "$out/gpu-session.tgz" -C "$work/logs" .
exit $status
