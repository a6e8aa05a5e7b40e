// Where the attention kernels (attention.cu: mma.sync; attention_hopper.cu: wgmma) find one
// (batch, head) of their operands in the [s, b, 3·heads·d] qkv and [s, b, heads·d] out tensors,
// and the constants of their base-2 softmax.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace mplan::exec::cuda::attention_layout {

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// One (batch, head) plane: element (row, c) is at base + row · row_stride + c.
struct Plane {
  const __nv_bfloat16* base;
  int64_t row_stride;
};

struct Dims {
  int s, b, heads, d;
  // qkv plane of (batch bi, head hh, slot 0/1/2 = Q/K/V).
  __device__ Plane qkv_plane(const __nv_bfloat16* qkv, int bi, int hh, int slot) const {
    const int64_t hd = static_cast<int64_t>(heads) * d;
    return {qkv + (static_cast<int64_t>(bi) * 3 + slot) * hd + static_cast<int64_t>(hh) * d,
            static_cast<int64_t>(b) * 3 * hd};
  }
  // out/dout plane of (bi, hh).
  __device__ Plane out_plane(const __nv_bfloat16* o, int bi, int hh) const {
    const int64_t hd = static_cast<int64_t>(heads) * d;
    return {o + static_cast<int64_t>(bi) * hd + static_cast<int64_t>(hh) * d,
            static_cast<int64_t>(b) * hd};
  }
};

}  // namespace mplan::exec::cuda::attention_layout
