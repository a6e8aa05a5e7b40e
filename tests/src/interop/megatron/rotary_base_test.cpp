// Tests of the presets' RoPE bases: known for the RoPE presets, none for learned positions or
// models that are no preset.
#include "src/interop/megatron/rotary_base.hpp"

#include <gtest/gtest.h>

#include "src/common/embedded_configs.hpp"

namespace mplan {
namespace {

TEST(RotaryBase, Presets) {
  EXPECT_EQ(preset_rotary_base(load_model("llama3-8b")), 500000);
  EXPECT_EQ(preset_rotary_base(load_model("llama3-405b")), 500000);
  EXPECT_EQ(preset_rotary_base(load_model("llama2-70b")), 10000);
  EXPECT_EQ(preset_rotary_base(load_model("mixtral-8x7b")), 1000000);
  EXPECT_EQ(preset_rotary_base(load_model("gpt3-175b")), std::nullopt);  // learned positions
  ModelSpec custom = load_model("llama3-8b");
  custom.name = "my-llama";
  EXPECT_EQ(preset_rotary_base(custom), std::nullopt);
  EXPECT_EQ(kMegatronRotaryBase, 10000);
}

TEST(RotaryBase, EveryRopePresetIsKnown) {
  for (const auto& name : preset_names("models")) {
    ModelSpec m = load_model(name);
    EXPECT_EQ(preset_rotary_base(m).has_value(), m.position_embedding == PositionEmbedding::kRope)
        << name;
  }
}

}  // namespace
}  // namespace mplan
