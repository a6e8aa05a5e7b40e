#!/usr/bin/env bash
# Executor benchmark on a GPU host: `mplan run` on each plan under mpirun (with a trace of its
# last iteration), and the PyTorch baseline (shared/anchors/torch_gpt.py) in the same command, so
# the two are compared on the same machine at the same time. Writes run-<plan>.json,
# trace-<plan>.json and torch-*.txt to $OUT (or bench-logs/) and prints a summary table last:
# measured and predicted time and peak memory, and each stage's breakdown.
# Usage: scripts/gpu_bench.sh BIN_DIR TORCH_SCRIPT|none PLAN.json...
# Env: ITERS (default 20), WARMUP (5), TORCH_MODES ("compile eager"), TORCH_GPUS (4),
# TRACE_LEVEL (summary; ops: every kernel in the trace, as `mplan run --trace-level ops`).
set -uo pipefail
bin=$1 torch_script=$2
shift 2
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
out=${OUT:-bench-logs}
mkdir -p "$out"
iters=${ITERS:-20} warmup=${WARMUP:-5}
xargs_env=(-x NCCL_NVLS_ENABLE)  # and every MPLAN_* setting (kernel variants) to every rank
for v in $(compgen -e | grep '^MPLAN_' || true); do xargs_env+=(-x "$v"); done
for plan in "$@"; do
  name=$(basename "$plan" .json)
  np=$("$bin/mplan" validate "$plan" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["world_size"])')
  echo "== mplan run $name on $np GPU(s)"
  timeout 300 mpirun --oversubscribe --bind-to none -np "$np" "${xargs_env[@]}" \
    "$bin/mplan" run "$plan" --iters "$iters" --warmup "$warmup" --json "$out/run-$name.json" \
    --trace "$out/trace-$name.json" --trace-level "${TRACE_LEVEL:-summary}" 2>&1 | tee "$out/run-$name.log" | grep -vE '^iter ([2-9]|1[0-9])/' 
done
if [ "$torch_script" != none ]; then
  for mode in ${TORCH_MODES:-compile eager}; do
    c=1; [ "$mode" = eager ] && c=0
    g=${TORCH_GPUS:-4}
    tname=$(basename "$torch_script" .py)
    echo "== $tname ($mode) on $g GPU(s)"
    COMPILE=$c ITERS=${iters} timeout 400 torchrun --standalone --nproc_per_node "$g" \
      "$torch_script" 2>&1 | tee "$out/$tname-$mode-$g.txt" | grep -E "^torch_"
  done
fi
echo "== summary"
python3 - "$out" <<'PY'
import glob, json, os, re, sys
out = sys.argv[1]
print(f"{'what':34s} {'ms/iter':>9s} {'tok/s/GPU':>10s} {'TFLOP/s/GPU':>11s} {'pred ms':>8s} {'err':>6s} {'peak GiB':>9s} {'pred GiB':>9s} {'err':>6s}")
rows = []
for f in sorted(glob.glob(os.path.join(out, "run-*.json"))):
    j = json.load(open(f)); s = j["summary"]; p = j.get("prediction", {})
    peak = max(max(r["device_peak_bytes"], r["executor_peak_bytes"]) for r in j["memory"]["ranks"])
    pred_ms = p.get("iteration_time_s", 0) * 1e3
    pred_b = p.get("peak_bytes", 0)
    print(f"{'mplan ' + os.path.basename(f)[4:-5]:34s} {s['median_ms']:9.1f} {s['tokens_per_s_per_gpu']:10.0f} "
          f"{s['tflops_per_gpu']:11.1f} {pred_ms:8.1f} {100 * (pred_ms / s['median_ms'] - 1):+5.1f}% "
          f"{peak / 2**30:9.2f} {pred_b / 2**30:9.2f} {100 * (pred_b / peak - 1) if peak else 0:+5.1f}%")
    rows.append((os.path.basename(f)[4:-5], j.get("breakdown", [])))
for name, stages in rows:
    for st in stages:
        m, p = st.get("measured", {}), st.get("predicted", {})
        keys = ["compute_s", "tp_comm_s", "pp_comm_s", "dp_comm_s", "bubble_s", "optimizer_s"]
        print(f"  {name} stage {st['stage']}: " + "  ".join(
            f"{k[:-2]} {m.get(k, 0) * 1e3:.1f}/{p.get(k, 0) * 1e3:.1f}" for k in keys) + "  (measured/predicted ms)")
for f in sorted(glob.glob(os.path.join(out, "torch_*.txt"))):
    m = re.search(r"ms_per_iter=([\d.]+) tokens_per_s_per_gpu=(\d+) tflops_per_gpu=([\d.]+) peak_alloc_GiB=([\d.]+)", open(f).read())
    if m:
        print(f"{os.path.basename(f)[:-4]:34s} {float(m[1]):9.1f} {int(m[2]):10d} {float(m[3]):11.1f} {'':>8s} {float(m[4]):9.2f}")
PY
