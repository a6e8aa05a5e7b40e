// Hopper (sm_90a) attention kernels: the launchers attention.cu calls on devices of compute
// capability 9.0 (exec/cuda/attention_hopper.cu). Same layouts and results contract as the
// mma.sync kernels; the backward shares their dsum and the finalize of dK and dV over head chunks.
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

// The backward's plan and scratch, functions of the shape only: how many chunks the heads of a
// K/V group are dealt in (a divisor of heads / groups; several when the (batch, group) key blocks
// are too few to fill the device), the bytes of its f32 dQ accumulator and its count of ints
// (per-(batch, head, query step) counters, and the tile counter).
int hopper_bwd_chunks(const AttentionShape& sh);
int64_t hopper_bwd_dq_bytes(const AttentionShape& sh);
int64_t hopper_bwd_sem_count(const AttentionShape& sh);

// The rows of parts of dqkv's column sums the backward writes with one head chunk: colsum_q
// (BwdWork) holds this many rows of heads·d floats (dQ's columns), colsum_kv this many of
// 2·groups·d (dK's, then dV's): a launch_column_partials_finalize each.
int64_t hopper_bwd_colsum_q_parts(const AttentionShape& sh);
int64_t hopper_bwd_colsum_kv_parts(const AttentionShape& sh);

// dK, dV into dqkv (one chunk) or into work.dkv_part (attention.cu's finalize adds the chunks),
// and dQ into dqkv through the f32 accumulator work.dq_part (work.chunks: hopper_bwd_chunks;
// work.splits unused), from dsum = rowsum(dO ∘ O). sems: hopper_bwd_sem_count ints, cleared here.
// With work.colsum_q and colsum_kv (one chunk only), also the parts of dqkv's column sums (the
// QKV layer's bias gradient), from the kernel's registers.
void launch_hopper_attention_backward(const AttentionShape& sh, const bf16* qkv, const bf16* dout,
                                      const float* lse, const float* dsum, bf16* dqkv,
                                      const attention_layout::BwdWork& work, int* sems,
                                      float scale_log2, float scale, cudaStream_t stream);

}  // namespace mplan::exec::cuda
