#!/usr/bin/env bash
# HEAD (in-kernel dQ finalize): build; cuBLASLt bias-gradient epilogues probe; attention bench; the reference GPT and the
# Llama-family model beside torch.compile, power logged
set -uo pipefail
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
o=$OUT; mkdir -p $o/l; s=$(date +%s)
g++ -std=c++17 -O2 -I/usr/local/cuda/include carry/ltb/lt_bgrad.cpp -L/usr/local/cuda/lib64 -lcublasLt -lcudart -o /tmp/lt_bgrad > $o/l/ltb.log 2>&1 && /tmp/lt_bgrad > $o/lt_bgrad.txt 2>&1; echo "lt_bgrad rc $?"; cat $o/lt_bgrad.txt
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMPLAN_WITH_GPU=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DMPLAN_BUILD_BENCH=OFF -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc > $o/l/cmake.log 2>&1
cmake --build build-gpu -j16 --target mplan mplan_gpu_bench > $o/l/build.log 2>&1 || { tail -30 $o/l/build.log; exit 1; }
mkdir -p build-gpu/bin; cp build-gpu/cli/mplan build-gpu/bin/
echo "built $(( $(date +%s) - s )) s"
b=build-gpu/exec/cuda/tools/mplan_gpu_bench
timeout 60 $b --no-checks --only attention > $o/att.log 2>&1; grep "^attention" $o/att.log | grep -v "reference\|mma.sync"
nvidia-smi dmon -s pc -d 1 -o T > $o/dmon.txt 2>&1 &
dm=$!
export ITERS=5 WARMUP=2 TORCH_MODES=compile TORCH_GPUS=1 TRACE_LEVEL=ops
date +"== gpt start %H:%M:%S" >> $o/marks.txt
OUT=$o/gpt bash scripts/gpu_bench.sh build-gpu/bin carry/torch_gpt.py configs/plans/gpt3-1.3b-1gpu.json > $o/gpt.log 2>&1
date +"== llama start %H:%M:%S" >> $o/marks.txt
OUT=$o/llama bash scripts/gpu_bench.sh build-gpu/bin bench/torch_llama.py configs/plans/llama3.2-1b-1gpu.json > $o/llama.log 2>&1
date +"== end %H:%M:%S" >> $o/marks.txt
kill $dm
sed -n '/== summary/,$p' $o/gpt.log; sed -n '/== summary/,$p' $o/llama.log
for m in gpt llama; do python3 scripts/trace_top_ops.py $o/$m/trace-*.json 22 > $o/ops-$m.txt; done
rm -rf $o/gpt $o/llama
cat $o/ops-gpt.txt $o/ops-llama.txt
echo "total $(( $(date +%s) - s )) s"
