// Tests of the fp8 / fp4 rules across fields: Transformer Engine's hardware checks (FP8 from
// compute capability 8.9, blockwise from 9.0, MXFP8 and NVFP4 on Blackwell), --fp8-param-gather
// with the distributed optimizer, and Megatron's range of the bf16 layers per pipeline stage.
#include "src/plan/precision_rules.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/common/error.hpp"

namespace mplan {
namespace {

using ::testing::HasSubstr;

// Llama-3-8B (32 layers) on `cluster`: tp 2, pp 2, dp 2, with the distributed optimizer.
Plan plan_on(const char* cluster) {
  Plan p;
  p.model = load_model("llama3-8b");
  p.cluster = load_cluster(cluster);
  p.parallel.tp = 2;
  p.parallel.etp = 2;
  p.parallel.pp = 2;
  p.parallel.dp = 2;
  p.parallel.micro_batch_size = 1;
  p.parallel.global_batch_size = 16;
  p.parallel.distributed_optimizer = true;
  return p;
}

std::vector<Violation> rules(const Plan& p) {
  std::vector<Violation> v;
  append_precision_violations(p, v);
  return v;
}

TEST(PrecisionRules, NothingWithoutFp8OrFp4) {
  Plan p = plan_on("dgx-a100-80g");
  EXPECT_TRUE(rules(p).empty());
  EXPECT_TRUE(validate(p).empty());
}

TEST(PrecisionRules, RecipesOnTheGpusThatRunThem) {
  struct Case {
    const char* cluster;
    Fp8Recipe recipe;
    const char* field;  // "" : accepted
  };
  for (const Case& c :
       {Case{"dgx-a100-80g", Fp8Recipe::kDelayed, "training.fp8_format"},
        Case{"dgx-a100-80g", Fp8Recipe::kTensorwise, "training.fp8_format"},
        Case{"dgx-h100", Fp8Recipe::kDelayed, ""}, Case{"dgx-h100", Fp8Recipe::kTensorwise, ""},
        Case{"dgx-h100", Fp8Recipe::kBlockwise, ""},
        Case{"dgx-h100", Fp8Recipe::kMxfp8, "training.fp8_recipe"},
        Case{"dgx-h200", Fp8Recipe::kMxfp8, "training.fp8_recipe"},
        Case{"dgx-b200", Fp8Recipe::kMxfp8, ""}, Case{"gb200-nvl72", Fp8Recipe::kMxfp8, ""},
        Case{"dgx-b200", Fp8Recipe::kBlockwise, ""}}) {
    Plan p = plan_on(c.cluster);
    p.training.fp8_format = Fp8Format::kHybrid;
    p.training.fp8_recipe = c.recipe;
    std::vector<Violation> v = rules(p);
    const std::string what = std::string(c.cluster) + " " + to_string(c.recipe);
    if (*c.field == '\0') {
      EXPECT_TRUE(v.empty()) << what << ": " << (v.empty() ? "" : to_string(v[0]));
    } else {
      ASSERT_EQ(v.size(), 1u) << what;
      EXPECT_EQ(v[0].field, c.field) << what;
    }
  }
  Plan a = plan_on("dgx-a100-80g");
  a.training.fp8_format = Fp8Format::kE4m3;
  EXPECT_EQ(to_string(rules(a).at(0)),
            "training.fp8_format: FP8 needs compute capability 8.9 or later (Ada / Hopper); GPU "
            "'NVIDIA A100-SXM4-80GB' has 8");
  Plan h = plan_on("dgx-h100");
  h.training.fp8_format = Fp8Format::kE4m3;
  h.training.fp8_recipe = Fp8Recipe::kMxfp8;
  EXPECT_EQ(to_string(rules(h).at(0)),
            "training.fp8_recipe: MXFP8 (fp8_recipe mxfp8) needs compute capability 10 or later "
            "(Blackwell); GPU 'NVIDIA H100 80GB HBM3' has 9");
  // The first violation is what require_valid throws: `mplan validate` / `simulate` exit 2.
  EXPECT_THROW(require_valid(h), Error);
}

TEST(PrecisionRules, Nvfp4OnBlackwellOnly) {
  Plan h = plan_on("dgx-h200");
  h.training.fp4_format = Fp4Format::kE2m1;
  ASSERT_EQ(rules(h).size(), 1u);
  EXPECT_EQ(rules(h)[0].field, "training.fp4_format");
  EXPECT_THAT(rules(h)[0].message, HasSubstr("NVFP4"));
  Plan b = plan_on("dgx-b200");
  b.training.fp4_format = Fp4Format::kE2m1;
  EXPECT_TRUE(rules(b).empty());
}

TEST(PrecisionRules, ProfileWithoutComputeCapability) {
  Plan p = plan_on("dgx-h100");
  p.cluster.gpu.compute_capability = 0;
  p.training.fp8_format = Fp8Format::kE4m3;
  ASSERT_EQ(rules(p).size(), 1u);
  EXPECT_EQ(rules(p)[0].field, "cluster.gpu.compute_capability");
}

TEST(PrecisionRules, ParamGatherNeedsTheDistributedOptimizer) {
  Plan p = plan_on("dgx-h100");
  p.training.fp8_format = Fp8Format::kE4m3;
  p.training.fp8_param_gather = true;
  EXPECT_TRUE(rules(p).empty());
  p.parallel.distributed_optimizer = false;
  ASSERT_EQ(rules(p).size(), 1u);
  EXPECT_EQ(rules(p)[0].field, "training.fp8_param_gather");
  EXPECT_THAT(rules(p)[0].message, HasSubstr("only supported with distributed optimizer"));
}

TEST(PrecisionRules, Bf16LayersWithinOneStage) {
  // 32 layers at pp 2: at most 16 at either end.
  Plan p = plan_on("dgx-h100");
  p.training.fp8_format = Fp8Format::kHybrid;
  p.training.fp8_recipe = Fp8Recipe::kTensorwise;
  p.training.first_last_layers_bf16 = true;
  p.training.num_layers_at_start_in_bf16 = 16;
  p.training.num_layers_at_end_in_bf16 = 17;
  std::vector<Violation> v = rules(p);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(to_string(v[0]),
            "training.num_layers_at_end_in_bf16: num_layers_at_end_in_bf16 (17) must be between 0 "
            "and number of layers per pipeline stage (16).");
}

}  // namespace
}  // namespace mplan
