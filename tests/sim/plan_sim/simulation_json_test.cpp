// The JSON document of a simulation: every field `mplan simulate --json` promises, with the
// result's values.
#include "sim/plan_sim/simulation_json.hpp"

#include <gtest/gtest.h>

namespace mplan::sim {
namespace {

TEST(SimulationJson, FieldsAndValues) {
  SimulationResult r;
  r.iteration_time_s = 1.5;
  r.tokens_per_s = 1000;
  r.model_tflops_per_gpu = 150;
  r.mfu = 0.48;
  r.flops_formula = "megatron";
  r.breakdown.compute_s = 1.0;
  r.breakdown.bubble_s = 0.5;
  r.per_stage.push_back({0, 100, 10, 20, 30, 35, 5});
  r.per_stage.push_back({1, 90, 10, 20, 30, 25, 5});
  r.peak_bytes = 100;
  r.capacity_bytes = 1000;
  r.fits = true;
  const Json j = simulation_to_json(r);
  EXPECT_EQ(j.at("schema_version"), kSimulationSchemaVersion);
  EXPECT_EQ(j.at("iteration_time_s"), 1.5);
  EXPECT_EQ(j.at("tokens_per_s"), 1000.0);
  EXPECT_EQ(j.at("model_tflops_per_gpu"), 150.0);
  EXPECT_EQ(j.at("mfu"), 0.48);
  EXPECT_EQ(j.at("flops_formula"), "megatron");
  for (const char* k : {"compute_s", "tp_comm_s", "cp_comm_s", "ep_comm_s", "pp_comm_s",
                        "dp_comm_s", "bubble_s", "optimizer_s"})
    EXPECT_TRUE(j.at("breakdown").contains(k)) << k;
  EXPECT_EQ(j.at("breakdown").at("bubble_s"), 0.5);
  const Json& m = j.at("memory");
  ASSERT_EQ(m.at("per_stage").size(), 2u);
  const Json& s1 = m.at("per_stage")[1];
  EXPECT_EQ(s1.at("pp_rank"), 1);
  EXPECT_EQ(s1.at("peak_bytes"), 90);
  EXPECT_EQ(s1.at("weights_bytes"), 10);
  EXPECT_EQ(s1.at("grads_bytes"), 20);
  EXPECT_EQ(s1.at("optimizer_bytes"), 30);
  EXPECT_EQ(s1.at("activations_bytes"), 25);
  EXPECT_EQ(s1.at("other_bytes"), 5);
  EXPECT_EQ(m.at("peak_bytes"), 100);
  EXPECT_EQ(m.at("capacity_bytes"), 1000);
  EXPECT_EQ(m.at("fits"), true);
}

}  // namespace
}  // namespace mplan::sim
