// Tests of Megatron-LM's layer-pattern expressions (--moe-layer-freq, --window-attn-skip-freq):
// the examples of arguments.py's moe_freq_type, the round trip of the runs format, bad input.
#include "src/interop/megatron/layer_pattern.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/common/error.hpp"

namespace mplan {
namespace {

using V = std::vector<int64_t>;

TEST(LayerPattern, MegatronsExamples) {
  EXPECT_EQ(parse_layer_pattern("([1]*3+[0]*1)*3", "--f"), (V{1, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 0}));
  EXPECT_EQ(parse_layer_pattern("([0]+[1]*3)", "--f"), (V{0, 1, 1, 1}));
  EXPECT_EQ(parse_layer_pattern("([1]*3+[0]*2)*2", "--f"), (V{1, 1, 1, 0, 0, 1, 1, 1, 0, 0}));
  EXPECT_EQ(parse_layer_pattern(" [1, 0 ,1] ", "--f"), (V{1, 0, 1}));
  const V ds = parse_layer_pattern("[0]*3+[1]*58", "--moe-layer-freq");
  ASSERT_EQ(ds.size(), 61u);
  EXPECT_EQ(ds[2], 0);
  EXPECT_EQ(ds[3], 1);
  EXPECT_TRUE(is_layer_pattern("[0]*3+[1]*58"));
  EXPECT_FALSE(is_layer_pattern("2"));
}

TEST(LayerPattern, FormatReadsBack) {
  const V ds = parse_layer_pattern("[0]*3+[1]*58", "--f");
  EXPECT_EQ(format_layer_pattern(ds), "([0]*3+[1]*58)");
  EXPECT_EQ(format_layer_pattern(V{1, 0, 1}), "([1]+[0]+[1])");
  for (const V& v : {ds, V{1}, V{0, 0, 1, 1, 0}})
    EXPECT_EQ(parse_layer_pattern(format_layer_pattern(v), "--f"), v);
}

TEST(LayerPattern, BadExpressionsNameTheFlag) {
  for (const char* bad : {"[", "[1,]", "[1]*", "([1]", "[1]+", "[1]-[0]", "[1]*70000", "x"}) {
    try {
      parse_layer_pattern(bad, "--moe-layer-freq");
      ADD_FAILURE() << bad << " accepted";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), ::testing::StartsWith("--moe-layer-freq: \""));
    }
  }
}

}  // namespace
}  // namespace mplan
