#!/usr/bin/env bash
# Iteration graphs over two ranks (MPLAN_CUDA_GRAPH=1; off by default where the world has more
# than one rank): the tiny GPT and the tiny Llama at tp 2 with sequence parallelism, pp 2
# (1F1B and zero-bubble H1), dp 2 with the distributed optimizer and overlapped gradient reduction
# and parameter gather; each run with graphs off and on, six iterations, losses and gradient
# norms compared as printed.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
o=$OUT; mkdir -p /tmp/l /tmp/p; s=$(date +%s)
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMPLAN_WITH_GPU=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DMPLAN_BUILD_BENCH=OFF -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc > /tmp/l/cmake.log 2>&1
cmake --build build-gpu -j32 --target mplan > /tmp/l/build.log 2>&1 || { tail -30 /tmp/l/build.log; exit 1; }
echo "built $(( $(date +%s) - s )) s"
python3 - <<'PY'
import json
for model in ("tiny-gpt", "tiny-llama"):
    base = json.load(open(f"configs/plans/{model}.json"))
    for name, par in {
        "tp2sp": {"tp": 2, "sequence_parallel": True},
        "pp2": {"pp": 2},
        "pp2zb": {"pp": 2, "schedule": "zb-h1"},
        "dp2do": {"dp": 2, "distributed_optimizer": True, "overlap_grad_reduce": True, "overlap_param_gather": True},
    }.items():
        p = json.loads(json.dumps(base))
        p["parallel"] = {"tp": 1, "pp": 1, "dp": 1, "micro_batch_size": 2, "global_batch_size": 8, **par}
        json.dump(p, open(f"/tmp/p/{model}-{name}.json", "w"))
PY
{
for f in /tmp/p/*.json; do
  n=$(basename $f .json)
  for g in 0 1; do
    MPLAN_CUDA_GRAPH=$g timeout 120 mpirun --allow-run-as-root -np 2 -x NCCL_NVLS_ENABLE -x MPLAN_CUDA_GRAPH build-gpu/cli/mplan run $f --backend cuda --iters 6 > /tmp/l/$n-$g.log 2>&1
    echo "$n graph=$g rc $?"
    grep -o "lm loss: [0-9.E+-]*\|grad norm: [0-9.]*" /tmp/l/$n-$g.log | paste -sd' ' > /tmp/l/$n-$g.losses
    grep -E "iteration graphs|rror" /tmp/l/$n-$g.log | sort | uniq -c | head -4
  done
  if [ -s /tmp/l/$n-0.losses ] && cmp -s /tmp/l/$n-0.losses /tmp/l/$n-1.losses; then echo "$n: same losses and norms"; else echo "$n: DIFFERENT"; cat /tmp/l/$n-0.losses /tmp/l/$n-1.losses; fi
done
echo "total $(( $(date +%s) - s )) s"
} > $o/graphs.txt 2>&1
cat $o/graphs.txt
