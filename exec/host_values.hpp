// Tensor contents as host f32 values, whatever the tensor's dtype: uploads round to bf16 (nearest,
// ties to even) or convert to i32 by value; downloads are exact for f32 and bf16. For tests and
// the GPU check tools, which compare backends element by element; a training step never does this.
#pragma once

#include <cstdint>
#include <vector>

#include "exec/backend.hpp"
#include "exec/cpu/bf16.hpp"

namespace mplan::exec {

// Writes v (t.numel() values) into t on be.
inline void upload_values(Backend& be, Tensor t, const std::vector<float>& v) {
  if (t.dtype == DType::kF32) {
    be.upload(t, v.data());
  } else if (t.dtype == DType::kBF16) {
    std::vector<uint16_t> b(v.size());
    for (size_t i = 0; i < v.size(); ++i) b[i] = f32_to_bf16(v[i]);
    be.upload(t, b.data());
  } else {
    std::vector<int32_t> b(v.size());
    for (size_t i = 0; i < v.size(); ++i) b[i] = static_cast<int32_t>(v[i]);
    be.upload(t, b.data());
  }
}

// t's elements on be, as f32 (synchronizes, as Backend::download does).
inline std::vector<float> download_values(Backend& be, Tensor t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  if (t.dtype == DType::kF32) {
    be.download(out.data(), t);
  } else if (t.dtype == DType::kBF16) {
    std::vector<uint16_t> b(out.size());
    be.download(b.data(), t);
    for (size_t i = 0; i < out.size(); ++i) out[i] = bf16_to_f32(b[i]);
  } else {
    std::vector<int32_t> b(out.size());
    be.download(b.data(), t);
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(b[i]);
  }
  return out;
}

}  // namespace mplan::exec
