#!/usr/bin/env bash
# The H200 calibrated again with the current kernels (the compile-time causal mask of the
# attention forward, the bias gradients in the LayerNorm backward): the calibration and the eight
# accuracy plans in one call, nothing fitted to them.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ITERS=3 WARMUP=1 scripts/gpu_calibrate.sh --full --base configs/clusters/h200x4.json --name h200-calibrated \
  configs/plans/accuracy/{gpt-mbs4,llama-mbs2,gpt-mbs1,llama-seq2048,gpt-wide-hd64,llama-mbs1,gpt-mbs2,gpt-seq4096}.json
