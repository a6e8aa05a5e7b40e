#!/usr/bin/env bash
# Predicted against measured on a GPU host: `mplan run` on each plan (scripts/gpu_bench.sh, no
# PyTorch baseline: run-<plan>.json reports), then `mplan accuracy` over those reports, once
# against each plan's own cluster profile and, with --cluster, once against that profile (e.g. one
# `mplan calibrate` just wrote). Results under $OUT (default accuracy-out/): runs/, accuracy/ and
# accuracy-<profile>/ (accuracy.md, .json, .svg).
# Usage: scripts/gpu_accuracy.sh BIN_DIR [--cluster PROFILE] [--title T] PLAN.json...
# Env: ITERS (default 20), WARMUP (5), as scripts/gpu_bench.sh reads them; DEADLINE (epoch
# seconds): no plan is started after DEADLINE - 60, the table covers the runs done (exit 1).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$1
shift
cluster="" title="Predicted against measured"
while [ $# -gt 0 ]; do
  case $1 in
    --cluster) cluster=$2; shift 2 ;;
    --title) title=$2; shift 2 ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || { echo "usage: $0 BIN_DIR [--cluster PROFILE] [--title T] PLAN.json..." >&2; exit 2; }
out=${OUT:-accuracy-out}
mkdir -p "$out/runs"
reports=()
for plan in "$@"; do
  if [ -n "${DEADLINE:-}" ] && [ $(( $(date +%s) + 60 )) -gt "$DEADLINE" ]; then
    echo "gpu_accuracy: out of time: $plan and the plans after it not run" >&2
    break
  fi
  OUT="$out/runs" bash "$here/gpu_bench.sh" "$bin" none "$plan"
  r="$out/runs/run-$(basename "$plan" .json).json"
  if [ -f "$r" ]; then reports+=("$r"); else echo "gpu_accuracy: no report for $plan (the run failed: $out/runs/run-$(basename "$plan" .json).log)" >&2; fi
done
[ ${#reports[@]} -gt 0 ] || { echo "gpu_accuracy: no run succeeded" >&2; exit 1; }
status=0
echo "== mplan accuracy (each plan's own cluster profile)"
"$bin/mplan" accuracy "${reports[@]}" --out-dir "$out/accuracy" --title "$title" || status=1
if [ -n "$cluster" ]; then
  echo "== mplan accuracy --cluster $cluster"
  "$bin/mplan" accuracy "${reports[@]}" --cluster "$cluster" \
    --out-dir "$out/accuracy-$(basename "$cluster" .json)" --title "$title ($(basename "$cluster"))" || status=1
fi
[ ${#reports[@]} -eq $# ] || status=1
exit $status
