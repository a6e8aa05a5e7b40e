// One attribute of the current CUDA device, read once per device and kept: the attention
// launchers ask on every call (compute capability, multiprocessor count).
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <atomic>

#include "exec/cuda/cuda_check.hpp"

namespace mplan::exec::cuda {

// Attribute A of the current device; devices 64 and above are asked every time.
template <cudaDeviceAttr A>
int current_device_attribute() {
  static std::array<std::atomic<int>, 64> cache{};  // value + 1; 0: not read yet
  int dev = 0;
  MPLAN_CUDA_CHECK(cudaGetDevice(&dev));
  const bool cached = dev >= 0 && dev < 64;
  if (cached) {
    const int c = cache[dev].load();
    if (c != 0) return c - 1;
  }
  int v = 0;
  MPLAN_CUDA_CHECK(cudaDeviceGetAttribute(&v, A, dev));
  if (cached) cache[dev].store(v + 1);
  return v;
}

}  // namespace mplan::exec::cuda
