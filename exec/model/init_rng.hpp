// The weight initializer's random numbers: counter-based, so element e of full parameter p gets
// the same value whichever rank computes it and whatever shard holds it. That is what makes
// "initialize at full size, then shard" cheap: each rank computes only its shard's elements.
// value = N(0, 1) by Box-Muller from two 53-bit uniforms of splitmix64 over (seed, p, e).
// tests/exec/oracle/make_golden.py implements the same function in Python.
#pragma once

#include <cstdint>

namespace mplan::exec {

// splitmix64's finalizer (Steele, Lea, Flood 2014): a bijective 64-bit mix.
inline uint64_t splitmix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// A standard normal sample for element `element` of parameter `param` (Megatron order).
double init_normal(uint64_t seed, uint64_t param, uint64_t element);

// A uniform integer in [0, n) for synthetic data: counter-based on (seed, stream, index).
uint64_t counter_uniform(uint64_t seed, uint64_t stream, uint64_t index, uint64_t n);

}  // namespace mplan::exec
