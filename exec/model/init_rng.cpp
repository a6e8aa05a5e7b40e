// init_normal() and counter_uniform(): pure functions of their counters (no state).
#include "exec/model/init_rng.hpp"

#include <cmath>

namespace mplan::exec {

double init_normal(uint64_t seed, uint64_t param, uint64_t element) {
  uint64_t k = splitmix64(splitmix64(splitmix64(seed) ^ param) ^ element);
  uint64_t k2 = splitmix64(k);
  double u1 = (static_cast<double>(k >> 11) + 1.0) * 0x1.0p-53;  // (0, 1]
  double u2 = static_cast<double>(k2 >> 11) * 0x1.0p-53;         // [0, 1)
  constexpr double kTwoPi = 6.283185307179586;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(kTwoPi * u2);
}

uint64_t counter_uniform(uint64_t seed, uint64_t stream, uint64_t index, uint64_t n) {
  uint64_t k = splitmix64(splitmix64(splitmix64(seed ^ 0x5eed5eed5eed5eedull) ^ stream) ^ index);
  // Multiply-shift maps 64 random bits onto [0, n) with negligible bias for small n.
  return static_cast<uint64_t>((static_cast<unsigned __int128>(k) * n) >> 64);
}

}  // namespace mplan::exec
