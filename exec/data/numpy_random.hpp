// NumpyRandomState: the parts of numpy.random.RandomState(seed) that Megatron-LM's dataset
// indices use, bit for bit: MT19937 with the legacy integer seeding (init_genrand, the same as
// std::mt19937's seeding), numpy's random_interval (a masked rejection draw) and the in-place
// Fisher-Yates shuffle of a 1-D array. Invariant: the same seed gives numpy's permutations.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <utility>

namespace mplan::exec {

class NumpyRandomState {
 public:
  explicit NumpyRandomState(uint32_t seed) : mt_(seed) {}

  uint32_t next_uint32() { return static_cast<uint32_t>(mt_()); }
  uint64_t next_uint64() {
    const uint64_t hi = next_uint32();
    return (hi << 32) | next_uint32();
  }

  // A uniform integer in [0, max] (numpy's random_interval).
  uint64_t random_interval(uint64_t max) {
    if (max == 0) return 0;
    uint64_t mask = max;
    mask |= mask >> 1;
    mask |= mask >> 2;
    mask |= mask >> 4;
    mask |= mask >> 8;
    mask |= mask >> 16;
    mask |= mask >> 32;
    uint64_t value;
    if (max <= 0xffffffffull) {
      while ((value = (next_uint32() & mask)) > max) {
      }
    } else {
      while ((value = (next_uint64() & mask)) > max) {
      }
    }
    return value;
  }

  // RandomState.shuffle(x) for a 1-D array: for i = n-1 down to 1, swap x[i] and x[j], j in [0, i].
  template <class T>
  void shuffle(std::span<T> x) {
    for (size_t i = x.size(); i-- > 1;) {
      const auto j = static_cast<size_t>(random_interval(i));
      std::swap(x[i], x[j]);
    }
  }

 private:
  std::mt19937 mt_;
};

}  // namespace mplan::exec
