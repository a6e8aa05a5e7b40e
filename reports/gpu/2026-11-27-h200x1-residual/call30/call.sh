#!/usr/bin/env bash
# The final tree (cef9577: the xent launchers' helper, dispatch_vpl shared): build; every gpu
# test; checks; memory bench; GPT and Llama beside torch.compile.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export MPLAN_EXEC_GOLDEN="$PWD/tests/exec/oracle/golden.json"
o=$OUT; mkdir -p $o/l; s=$(date +%s)
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMPLAN_WITH_GPU=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DMPLAN_BUILD_BENCH=OFF -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc > $o/l/cmake.log 2>&1
cmake --build build-gpu -j16 --target mplan mplan_gpu_bench mplan_gpu_tests > $o/l/build.log 2>&1 || { tail -30 $o/l/build.log; exit 1; }
mkdir -p build-gpu/bin; cp build-gpu/cli/mplan build-gpu/bin/
echo "built $(( $(date +%s) - s )) s"
b=build-gpu/exec/cuda/tools/mplan_gpu_bench
timeout 150 build-gpu/tests/exec/cuda/mplan_gpu_tests > $o/gpu_tests.log 2>&1; echo "gpu tests rc $?"
grep -E "^\[  (FAILED|PASSED|SKIPPED) |tests ran" $o/gpu_tests.log | head
timeout 150 $b --checks-only > $o/checks.log 2>&1; echo "checks rc $?"; grep -E "^checks|FAIL" $o/checks.log | head -12
grep -E "one-pass" $o/checks.log | head -20
timeout 90 $b --no-checks --only memory > $o/mem.log 2>&1; grep -E "^(layernorm fwd|rmsnorm fwd|xent)" $o/mem.log
nvidia-smi dmon -s pc -d 1 -o T > $o/dmon.txt 2>&1 &
dm=$!
export ITERS=5 WARMUP=2 TORCH_MODES=compile TORCH_GPUS=1 TRACE_LEVEL=ops
OUT=$o/gpt bash scripts/gpu_bench.sh build-gpu/bin carry/torch_gpt.py configs/plans/gpt3-1.3b-1gpu.json > $o/gpt.log 2>&1
OUT=$o/llama bash scripts/gpu_bench.sh build-gpu/bin bench/torch_llama.py configs/plans/llama3.2-1b-1gpu.json > $o/llama.log 2>&1
kill $dm
for m in gpt llama; do sed -n '/== summary/,$p' $o/$m.log; grep -E "iteration +[0-9]/" $o/$m.log | grep -v torch | sed 's/.*iteration \+\([0-9]\).*(ms): \([0-9.]*\).*lm loss: \([0-9.E+-]*\).*grad norm: \([0-9.]*\).*/it \1 \2 ms loss \3 gnorm \4/'; done
for m in gpt llama; do python3 scripts/trace_top_ops.py $o/$m/trace-*.json 26 > $o/ops-$m.txt; done
rm -rf $o/gpt $o/llama
cat $o/ops-gpt.txt $o/ops-llama.txt
python3 - $o/dmon.txt <<'PY'
import sys, statistics
w, clk = [], []
for l in open(sys.argv[1]):
    f = l.split()
    if len(f) == 7 and f[1] == "0" and float(f[2]) > 300:
        w.append(float(f[2])); clk.append(float(f[6]))
if w:
    print("dmon: under load (> 300 W)", len(w), "s, median", statistics.median(w), "W, SM clock median", statistics.median(clk), "MHz, min", min(clk))
PY
rm -rf $o/l
echo "total $(( $(date +%s) - s )) s"
