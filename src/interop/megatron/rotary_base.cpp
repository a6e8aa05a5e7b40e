// RoPE bases by preset name, each with its source.
#include "src/interop/megatron/rotary_base.hpp"

#include <string_view>

namespace mplan {

std::optional<int64_t> preset_rotary_base(const ModelSpec& m) {
  if (m.position_embedding != PositionEmbedding::kRope) return std::nullopt;
  struct Known {
    std::string_view preset;
    int64_t base;
  };
  static constexpr Known kKnown[] = {
      // Touvron et al. 2023 (Llama 2) keep RoPE's base of 10000 (Su et al.); config.json
      // rope_theta 10000.
      {"llama2-7b", 10000},
      {"llama2-70b", 10000},
      // Llama Team 2024, 'The Llama 3 Herd of Models', Section 3.2: "We increase the RoPE base
      // frequency hyperparameter to 500,000"; config.json rope_theta 500000.
      {"llama3-8b", 500000},
      {"llama3-70b", 500000},
      {"llama3-405b", 500000},
      // Mixtral-8x7B config.json rope_theta 1e6, as in Megatron-LM's examples/mixtral
      // (--rotary-base 1000000).
      {"mixtral-8x7b", 1000000},
  };
  for (const Known& k : kKnown)
    if (m.name == k.preset) return k.base;
  return std::nullopt;
}

}  // namespace mplan
