// The RoPE base (Megatron-LM's --rotary-base, rope_theta in Hugging Face configs) of the model
// presets. A plan does not hold it: it changes no time or memory of a step, only the model's
// numbers. Export writes it so that a preset's job trains that model. Invariant: known only for
// presets with rotary position embeddings; other models keep Megatron-LM's default.
#pragma once

#include <cstdint>
#include <optional>

#include "src/model/model_spec.hpp"

namespace mplan {

// megatron/training/arguments.py: --rotary-base defaults to 10000.
inline constexpr int64_t kMegatronRotaryBase = 10000;

// The RoPE base of the preset `m` is named after, when `m` uses RoPE and the base is known.
std::optional<int64_t> preset_rotary_base(const ModelSpec& m);

}  // namespace mplan
