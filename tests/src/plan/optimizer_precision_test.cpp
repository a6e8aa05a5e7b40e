// Tests of the precision-aware optimizer's fields: Megatron-LM's choices and defaults, the JSON
// round trip, and OptimizerConfig's rule (a non-fp32 dtype needs the precision-aware optimizer).
#include "src/plan/optimizer_precision.hpp"

#include <gtest/gtest.h>

#include "src/common/error.hpp"

namespace mplan {
namespace {

OptimizerPrecision read(const std::string& text) {
  const Json j = parse_json(text, "t");
  JsonObject o(j, "training");
  OptimizerPrecision p = optimizer_precision_from_json(o);
  o.finish();
  return p;
}

TEST(OptimizerPrecision, DefaultsAreFp32AndRoundTrip) {
  const OptimizerPrecision d = read("{}");
  EXPECT_FALSE(d.use_precision_aware_optimizer);
  EXPECT_EQ(d.exp_avg_dtype, OptimStateDtype::kFp32);
  Json j = Json::object();
  optimizer_precision_to_json(d, j);
  EXPECT_TRUE(j.empty());
  const OptimizerPrecision p = read(
      R"({"use_precision_aware_optimizer": true, "exp_avg_dtype": "bf16",
          "exp_avg_sq_dtype": "fp8", "main_params_dtype": "fp16"})");
  EXPECT_EQ(p.exp_avg_sq_dtype, OptimStateDtype::kFp8);
  EXPECT_EQ(bytes_of(p.exp_avg_dtype), 2);
  EXPECT_EQ(bytes_of(p.exp_avg_sq_dtype), 1);
  Json k = Json::object();
  optimizer_precision_to_json(p, k);
  EXPECT_EQ(read(k.dump()), p);
}

TEST(OptimizerPrecision, MegatronsChoicesAndRule) {
  EXPECT_THROW(read(R"({"main_params_dtype": "bf16"})"), Error);  // fp32 or fp16 only
  EXPECT_THROW(read(R"({"exp_avg_dtype": "fp64"})"), Error);
  OptimizerPrecision p;
  EXPECT_FALSE(optimizer_precision_problem(p));
  p.exp_avg_dtype = OptimStateDtype::kBf16;
  const auto bad = optimizer_precision_problem(p);
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->first, "training.exp_avg_dtype");
  EXPECT_EQ(bad->second.rfind("exp_avg_dtype can only be fp32 when not using precision-aware "
                              "optimizer",
                              0),
            0u);
  p.use_precision_aware_optimizer = true;
  EXPECT_FALSE(optimizer_precision_problem(p));
}

}  // namespace
}  // namespace mplan
