// Hopper (sm_90a) attention kernels: the launchers attention.cu calls on devices of compute
// capability 9.0 (exec/cuda/attention_hopper.cu). Same layouts and results contract as the
// mma.sync kernels; the backward shares their dsum, dQ partial buffers and finalize.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "exec/cuda/attention_layout.cuh"
#include "exec/cuda/device_utils.cuh"
#include "exec/cuda/kernels.hpp"

namespace mplan::exec::cuda {

// Head dims 64 and 128 (bf16, causal); the caller checks the device and the alignment.
bool hopper_attention_shape_ok(const AttentionShape& sh);

// out, lse from qkv; scale_log2 = softmax scale · log2 e.
void launch_hopper_attention_forward(const AttentionShape& sh, const bf16* qkv, bf16* out,
                                     float* lse, float scale_log2, cudaStream_t stream);

// dK, dV into dqkv (one chunk) or into work.dkv_part, and the dQ partial sums into work.dq_part
// (attention_layout::BwdWork, attention.cu's plan and finalize), from dsum = rowsum(dO ∘ O).
void launch_hopper_attention_backward(const AttentionShape& sh, const bf16* qkv, const bf16* dout,
                                      const float* lse, const float* dsum, bf16* dqkv,
                                      const attention_layout::BwdWork& work, float scale_log2,
                                      float scale, cudaStream_t stream);

}  // namespace mplan::exec::cuda
