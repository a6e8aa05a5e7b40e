// bfloat16 stored as uint16_t: the top half of an IEEE f32. Conversions to bf16 round to nearest,
// ties to even (as CUDA's __float2bfloat16_rn), and keep NaN a NaN; bf16 -> f32 is exact.
#pragma once

#include <cstdint>
#include <cstring>

namespace mplan::exec {

inline float bf16_to_f32(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// f32 -> nearest bf16 -> f32: the value a bf16 tensor would hold.
inline float round_to_bf16(float f) { return bf16_to_f32(f32_to_bf16(f)); }

}  // namespace mplan::exec
