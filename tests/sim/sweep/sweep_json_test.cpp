// Tests of the sweep's JSON: keys and types, counts that add up, the top K in rank order, and the
// uneven pipeline split shown in the layout.
#include "sim/sweep/sweep_json.hpp"

#include <gtest/gtest.h>

#include "tests/sim/sweep/sweep_test_util.hpp"

namespace mplan::sweep {
namespace {

TEST(SweepJson, Shape) {
  const SweepRequest req = testing::tiny_request();
  SweepOptions o;
  o.threads = 2;
  o.simulate = testing::fake_simulate;
  const SweepResult r = run_sweep(req, o);
  const Json j = sweep_to_json(req, r, 3, "best.json");
  EXPECT_EQ(j["schema_version"], 2);
  EXPECT_EQ(j["model"], "tiny");
  EXPECT_EQ(j["cluster"], "h200x4");
  EXPECT_EQ(j["gpus"], 4);
  EXPECT_EQ(j["global_batch_size"], 8);
  EXPECT_EQ(j["seq_length"], 24);
  EXPECT_EQ(j["objective"], "throughput");
  EXPECT_EQ(j["fixed"], "");
  const Json& c = j["counts"];
  // The space of CandidateSpace.ExchangesAndOffloadingCountedByHand; pinned to the plan's
  // exchange, no offloading, userbuffer overlap or FSDP, 384 with 120 invalid: 42 by validate's
  // rules, 78 zb-h1 (sweep_test.cpp). The other axes multiply them: zb-h1 (pp 2 dp 2: 30 x 2 for
  // FSDP; pp 4: 20; cp 2 pp 2: 120 x 2; tp 2 pp 2: 40 x 3/2 for the overlap) 380; tp 4 (64 x 3/2)
  // 96; interleaved with M < pp (20 + 60 + 15) 95.
  EXPECT_EQ(c["candidates"], 3008);
  EXPECT_EQ(c["invalid"], 571);
  EXPECT_EQ(c["simulated"].get<int64_t>() + c["invalid"].get<int64_t>() +
                c["out_of_memory_pruned"].get<int64_t>() + c["skipped"].get<int64_t>(),
            3008);
  EXPECT_EQ(c["skipped"], 0);
  EXPECT_EQ(j["top_k"], 3);
  EXPECT_EQ(j["memory_headroom"], 0.0);
  EXPECT_EQ(j["gpu_memory_bytes"], j["usable_memory_bytes"]);
  ASSERT_EQ(j["invalid_by_rule"].size(), 3u);
  EXPECT_EQ(j["invalid_by_rule"][0]["count"], 380);
  EXPECT_TRUE(j["invalid_by_rule"][0]["rule"].is_string());
  EXPECT_TRUE(j["invalid_by_rule"][0]["example"].is_string());
  ASSERT_EQ(j["top"].size(), 3u);
  for (int i = 0; i < 3; ++i) {
    const Json& t = j["top"][i];
    EXPECT_EQ(t["rank"], i + 1);
    for (const char* k : {"tp", "cp", "ep", "etp", "pp", "vpp", "dp"})
      EXPECT_TRUE(t["layout"][k].is_number_integer()) << k;
    EXPECT_TRUE(t["layout"]["first_stage_layers"].is_null());
    for (const char* k :
         {"iteration_time_s", "tokens_per_s", "model_tflops_per_gpu", "mfu", "bubble_fraction"})
      EXPECT_TRUE(t[k].is_number()) << k;
    EXPECT_TRUE(t["peak_bytes"].is_number_integer());
    EXPECT_EQ(t["fits"], true);
    // Each candidate's time breakdown, as simulate --json gives it.
    for (const char* k : {"compute_s", "tp_comm_s", "cp_comm_s", "ep_comm_s", "pp_comm_s",
                          "dp_comm_s", "bubble_s", "optimizer_s"})
      EXPECT_TRUE(t["breakdown"][k].is_number()) << k;
    EXPECT_EQ(t["breakdown"]["compute_s"], t["iteration_time_s"]);  // the fake's breakdown
    EXPECT_EQ(t["num_microbatches"].get<int64_t>(),
              8 / (t["micro_batch_size"].get<int64_t>() * t["layout"]["dp"].get<int64_t>()));
  }
  EXPECT_GE(j["top"][0]["tokens_per_s"].get<double>(), j["top"][1]["tokens_per_s"].get<double>());
  EXPECT_EQ(j["best_plan"], "best.json");
  EXPECT_EQ(j["threads"], 2);
  // More rows asked than fit: all of them.
  EXPECT_EQ(sweep_to_json(req, r, 100000, "")["top"].size(), static_cast<size_t>(r.fits));
  EXPECT_TRUE(sweep_to_json(req, r, 1, "")["best_plan"].is_null());
}

TEST(SweepJson, UnevenSplitIsShown) {
  Evaluated e;
  e.candidate.pp = 16;
  e.candidate.first_stage_layers = 7;
  e.candidate.last_stage_layers = 7;
  const Json j = evaluated_to_json(e, 16);
  EXPECT_EQ(j["layout"]["first_stage_layers"], 7);
  EXPECT_EQ(j["layout"]["last_stage_layers"], 7);
  EXPECT_FALSE(j.contains("rank"));
  EXPECT_EQ(j["num_microbatches"], 16);
}

}  // namespace
}  // namespace mplan::sweep
