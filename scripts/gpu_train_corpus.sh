#!/usr/bin/env bash
# On a lent GPU machine (one H200): the reference GPT with GPT-2's vocabulary
# (configs/plans/gpt3-1.3b-gpt2vocab-1gpu.json, global batch 4) trained on
# a real corpus (scripts/prepare_corpus.sh, carried to the machine) with warmup and cosine decay,
# evaluation every 200 iterations, checkpoints, metrics — and, in the same call, the synthetic-data
# run of the same plan, so the cost of the data path is measured on the same machine.
# A call trains at most SEGMENT iterations and resumes from the checkpoint the previous call left
# in CKPT (kept on the machine's disk while it stays lent; older iterations are pruned, a 1.3 B
# checkpoint is about 18 GB), so a run longer than one command's time limit is a few calls.
# Everything for the report goes to $OUT: the log and --json of each segment, the synthetic run's
# JSON, tb/metrics.jsonl and tb/curves.svg (training and validation loss, learning rate, redrawn
# over every segment so far), and train-report.md with the throughput beside the synthetic run.
# Usage: scripts/gpu_train_corpus.sh DATA_PREFIX
# Env: PLAN (configs/plans/gpt3-1.3b-gpt2vocab-1gpu.json), TRAIN_ITERS (2000), SEGMENT (150),
#      GLOBAL_BATCH (the plan's, 4; larger is slower),
#      WARMUP_ITERS (100), SPLIT (949,50,1), EVAL_INTERVAL (200), EVAL_ITERS (10), CKPT (/tmp/mplan-corpus-ckpt), BUILD (a build dir with
#      bin/mplan from an earlier call; built here when absent), SYNTHETIC_ITERS (30; 0: skip),
#      SAVE_INTERVAL (EVAL_INTERVAL; 0: no checkpoints, the whole run in one call).
set -uo pipefail
cd "$(dirname "$0")/.."
data=${1:?usage: scripts/gpu_train_corpus.sh DATA_PREFIX}
[ -f "$data.bin" ] && [ -f "$data.idx" ] || { echo "no $data.bin/.idx (scripts/prepare_corpus.sh)"; exit 2; }
out=${OUT:-train-corpus}
train_iters=${TRAIN_ITERS:-2000} segment=${SEGMENT:-150}
eval_interval=${EVAL_INTERVAL:-200} eval_iters=${EVAL_ITERS:-10} warmup_iters=${WARMUP_ITERS:-100}
ckpt=${CKPT:-/tmp/mplan-corpus-ckpt} build=${BUILD:-/tmp/mplan-corpus-build}
synthetic_iters=${SYNTHETIC_ITERS:-30}
. scripts/gpu_env.sh
mkdir -p "$out" "$build"

# Build once (Release, sm_90), outside the checkout.
if [ ! -x "$build/bin/mplan" ]; then
  start=$(date +%s)
  gpu_build "$build/tree" "$out" mplan || exit 1
  mkdir -p "$build/bin" && cp "$build/tree/cli/mplan" "$build/bin/"
  echo "built in $(( $(date +%s) - start )) s at revision $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
fi
mplan="$build/bin/mplan"

# The plan: the reference workload with GPT-2's vocabulary, with GLOBAL_BATCH when given.
plan=${PLAN:-configs/plans/gpt3-1.3b-gpt2vocab-1gpu.json}
plan_name=$(basename "$plan")
if [ -n "${GLOBAL_BATCH:-}" ]; then
  python3 - "$plan" "$GLOBAL_BATCH" "$build/plan.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
p["parallel"]["global_batch_size"] = int(sys.argv[2])
p["description"] = p.get("description", "") + f" Global batch {sys.argv[2]}."
json.dump(p, open(sys.argv[3], "w"), indent=1)
PY
  plan="$build/plan.json"
fi

# The synthetic-data run of the same plan (once per machine): the throughput to compare with.
if [ "$synthetic_iters" -gt 0 ] && [ ! -f "$out/synthetic.json" ]; then
  "$mplan" run "$plan" --iters "$synthetic_iters" --warmup 10 --log-interval 10 \
    --json "$out/synthetic.json" 2>&1 | tee "$out/synthetic.log" | tail -15
fi

# One segment of the training run, from the last checkpoint.
done_iters=$(cat "$ckpt/latest_checkpointed_iteration.txt" 2>/dev/null || echo 0)
if [ "$done_iters" -ge "$train_iters" ]; then
  echo "the run is complete: $ckpt is at iteration $done_iters of $train_iters"
else
  seg="segment-$(printf '%05d' "$done_iters")"
  save_interval=${SAVE_INTERVAL:-$eval_interval}
  ckpt_args=(--save "$ckpt" --load "$ckpt" --save-interval "$save_interval")
  [ "$save_interval" -gt 0 ] || ckpt_args=()
  "$mplan" run "$plan" --data-path "$data" --split "${SPLIT:-949,50,1}" --train-iters "$train_iters" \
    --lr 3e-4 --min-lr 3e-5 --lr-decay-style cosine --lr-warmup-iters "$warmup_iters" \
    --eval-interval "$eval_interval" --eval-iters "$eval_iters" \
    "${ckpt_args[@]}" --iters "$segment" \
    --warmup 5 --log-interval 10 --tensorboard-dir "$out/tb" --json "$out/$seg.json" \
    2>&1 | tee "$out/$seg.log" | grep -v "^ \[" | tail -40
  status=${PIPESTATUS[0]}
  # Keep only the current checkpoint (disk space).
  latest=$(cat "$ckpt/latest_checkpointed_iteration.txt" 2>/dev/null || echo -1)
  for d in "$ckpt"/iter_*; do
    [ -d "$d" ] || continue
    [ "$(basename "$d")" = "$(printf 'iter_%07d' "$latest")" ] || rm -rf "$d"
  done
  [ "$status" -eq 0 ] || { echo "mplan run failed ($status)"; exit "$status"; }
fi

# The report: throughput beside the synthetic run, the evaluations, the curves.
python3 - "$out" "$train_iters" "$plan_name" <<'PY'
import glob, json, os, sys
out, train_iters, plan_name = sys.argv[1], int(sys.argv[2]), sys.argv[3]
segs = [json.load(open(f)) for f in sorted(glob.glob(os.path.join(out, "segment-*.json")))]
lines = ["# The reference GPT on a real corpus (one H200)", ""]
if segs:
    s0 = segs[-1]
    lines += [f"Plan {plan_name} ({s0['model']}, global batch "
              f"{s0['iterations'][-1]['global_batch_size']}), data {s0['data']}, "
              f"{train_iters} iterations in all; {sum(len(s['iterations']) for s in segs)} "
              f"trained so far in {len(segs)} call(s).", ""]
syn = json.load(open(os.path.join(out, "synthetic.json"))) if os.path.exists(
    os.path.join(out, "synthetic.json")) else None
lines += ["| run | median ms/iteration | tokens/s/GPU | MFU |", "|---|---|---|---|"]
if syn:
    s = syn["summary"]
    lines.append(f"| synthetic tokens | {s['median_ms']:.1f} | {s['tokens_per_s_per_gpu']:.0f} | "
                 f"{100 * s['mfu']:.1f} % |")
for seg in segs:
    s = seg["summary"]
    lines.append(f"| corpus, iterations {seg['start_iteration'] + 1}-"
                 f"{seg['start_iteration'] + len(seg['iterations'])} | {s['median_ms']:.1f} | "
                 f"{s['tokens_per_s_per_gpu']:.0f} | {100 * s['mfu']:.1f} % |")
if syn and segs:
    import statistics
    med = statistics.median(seg["summary"]["median_ms"] for seg in segs)
    lines += ["", f"The corpus run's median iteration is {100 * (med / syn['summary']['median_ms'] - 1):+.2f} % "
              "of the synthetic run's (median over the segments): the data path, and the compute "
              "that real token ids change (repeated ids in the embedding's backward)."]
lines += ["", "| iteration | split | lm loss | PPL |", "|---|---|---|---|"]
for seg in segs:
    for e in seg["evaluations"]:
        lines.append(f"| {e['iteration']} | {e['prefix']} | {e['loss']:.4f} | {e['ppl']:.2f} |")
lines += ["", "Training and validation loss and the learning rate: tb/curves.svg "
          "(from tb/metrics.jsonl)."]
open(os.path.join(out, "train-report.md"), "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
