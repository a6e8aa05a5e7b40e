// Tests of preset lookup: every preset the issue asks for is embedded, unknown names list the
// known ones, and names with '/' or '.json' are read as files.
#include "src/common/embedded_configs.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/common/error.hpp"

namespace mplan {
namespace {

using ::testing::HasSubstr;
using ::testing::IsSupersetOf;

TEST(EmbeddedConfigs, ShipsTheRequiredPresets) {
  EXPECT_THAT(preset_names("models"),
              IsSupersetOf({"gpt3-1.3b", "gpt3-175b", "llama2-7b", "llama2-70b", "llama3-8b",
                            "llama3-70b", "llama3-405b", "mixtral-8x7b"}));
  EXPECT_THAT(preset_names("clusters"), IsSupersetOf({"dgx-a100-80g", "dgx-h100", "dgx-h200",
                                                      "h200x4", "dgx-b200", "gb200-nvl72"}));
}

TEST(EmbeddedConfigs, FileReferences) {
  EXPECT_TRUE(is_file_reference("plans/a.json"));
  EXPECT_TRUE(is_file_reference("a.json"));
  EXPECT_FALSE(is_file_reference("llama3-8b"));
  EXPECT_FALSE(is_file_reference(".json"));
}

TEST(EmbeddedConfigs, UnknownPresetListsTheKnownOnes) {
  try {
    load_config_text("models", "gpt5", "model");
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("model: unknown model preset 'gpt5' (known: "));
    EXPECT_THAT(e.what(), HasSubstr("llama3-8b"));
  }
  EXPECT_THROW(load_config_text("clusters", "no-such-dir/x.json", "cluster"), Error);
  EXPECT_THAT(load_config_text("models", "llama3-8b", "model"), HasSubstr("\"num_layers\": 32"));
}

TEST(EmbeddedConfigs, UnreadableFileNamesTheField) {
  try {
    read_text_file("/nonexistent/plan.json", "plan");
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "plan: cannot read file '/nonexistent/plan.json'");
  }
}

}  // namespace
}  // namespace mplan
