// Sets of named flags stored as bits (bit i = names[i]): recompute_modules, offload_modules.
// Invariant: names_of(bits_of(ns)) lists ns's names once each, in `names` order.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "src/common/error.hpp"

namespace mplan {

// The names of the bits set, in `names` order.
inline std::vector<std::string> names_of_bits(std::span<const char* const> names, uint32_t bits) {
  std::vector<std::string> out;
  for (size_t i = 0; i < names.size(); ++i)
    if (bits & (1u << i)) out.push_back(names[i]);
  return out;
}

// The bits of `given`; a name not in `names` is an Error naming `field`, the names allowed and
// `note` after them (e.g. why a Megatron-LM name is not among them).
inline uint32_t bits_of_names(std::span<const char* const> names,
                              const std::vector<std::string>& given, const std::string& field,
                              const std::string& note = "") {
  uint32_t bits = 0;
  for (const std::string& n : given) {
    size_t i = 0;
    while (i < names.size() && n != names[i]) ++i;
    if (i == names.size()) {
      std::string allowed;
      for (const char* a : names) allowed += (allowed.empty() ? "" : ", ") + std::string(a);
      throw Error(cat(field, ": must name modules among ", allowed, note, "; got \"", n, "\""));
    }
    bits |= 1u << i;
  }
  return bits;
}

}  // namespace mplan
