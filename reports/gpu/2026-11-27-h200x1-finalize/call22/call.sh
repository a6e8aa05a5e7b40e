#!/usr/bin/env bash
# Tree with the faster LayerNorm backward, RoPE, column sums and MPLAN_GEMM_TUNE: build; every gpu test; checks; memory
# and attention bench; GPT and Llama beside torch.compile, then both with MPLAN_GEMM_TUNE=1 (mplan only)
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
timeout 150 $b --checks-only > $o/checks.log 2>&1; echo "checks rc $?"; grep -E "^checks|FAIL" $o/checks.log | head -8
timeout 90 $b --no-checks --only memory > $o/mem-new.log 2>&1; grep -E "^(layernorm|bias_grad|rope|add|gelu)" $o/mem-new.log
timeout 60 $b --no-checks --only attention > $o/att.log 2>&1; grep "^attention" $o/att.log | grep -v "reference\|mma.sync"
nvidia-smi dmon -s pc -d 1 -o T > $o/dmon.txt 2>&1 &
dm=$!
export ITERS=5 WARMUP=2 TORCH_MODES=compile TORCH_GPUS=1 TRACE_LEVEL=ops
date +"== gpt start %H:%M:%S" >> $o/marks.txt
OUT=$o/gpt bash scripts/gpu_bench.sh build-gpu/bin carry/torch_gpt.py configs/plans/gpt3-1.3b-1gpu.json > $o/gpt.log 2>&1
date +"== llama start %H:%M:%S" >> $o/marks.txt
OUT=$o/llama bash scripts/gpu_bench.sh build-gpu/bin bench/torch_llama.py configs/plans/llama3.2-1b-1gpu.json > $o/llama.log 2>&1
date +"== tuned start %H:%M:%S" >> $o/marks.txt
ITERS=3 WARMUP=1 MPLAN_GEMM_TUNE=1 OUT=$o/gpt-tuned bash scripts/gpu_bench.sh build-gpu/bin none configs/plans/gpt3-1.3b-1gpu.json > $o/gpt-tuned.log 2>&1
ITERS=3 WARMUP=1 MPLAN_GEMM_TUNE=1 OUT=$o/llama-tuned bash scripts/gpu_bench.sh build-gpu/bin none configs/plans/llama3.2-1b-1gpu.json > $o/llama-tuned.log 2>&1
date +"== end %H:%M:%S" >> $o/marks.txt
kill $dm
for m in gpt llama gpt-tuned llama-tuned; do sed -n '/== summary/,$p' $o/$m.log; done
for m in gpt llama gpt-tuned llama-tuned; do python3 scripts/trace_top_ops.py $o/$m/trace-*.json 24 > $o/ops-$m.txt; done
rm -rf $o/gpt $o/llama $o/gpt-tuned $o/llama-tuned
cat $o/ops-gpt.txt $o/ops-llama.txt
echo "total $(( $(date +%s) - s )) s"
