// Tests of the messages for impossible requests: GPU counts the cluster cannot host, no valid
// plan (with the nearest GPU counts that have one), and no plan that fits (with the smallest GPU
// count that does).
#include "sim/sweep/sweep_advice.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/common/error.hpp"
#include "tests/sim/sweep/sweep_test_util.hpp"

namespace mplan::sweep {
namespace {

using ::testing::HasSubstr;

std::string error_of(const SweepRequest& r) {
  try {
    check_request(r);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(SweepAdvice, WarnsWhenTheBatchIsTooSmallForTheGpus) {
  SweepRequest r = testing::tiny_request(1024, 64);
  Candidate c;
  c.tp = 8, c.pp = 16, c.dp = 8, c.micro_batch_size = 1;  // 64 / 8 = 8 micro-batches < 16 stages
  const auto w = batch_warning(r, c);
  ASSERT_TRUE(w.has_value());
  EXPECT_THAT(*w, HasSubstr("the global batch 64 is too small for 1024 GPUs"));
  EXPECT_THAT(*w, HasSubstr("has 8 micro-batches per pipeline for its 16 stages"));
  EXPECT_THAT(*w, HasSubstr("a global batch of at least 128"));
  c.dp = 4, c.pp = 32, c.tp = 8;  // 16 micro-batches < 32 stages
  EXPECT_TRUE(batch_warning(r, c).has_value());
  r.global_batch_size = 512;  // 128 >= 32: fine
  EXPECT_FALSE(batch_warning(r, c).has_value());
  c.pp = 1;
  EXPECT_FALSE(batch_warning(r, c).has_value());
}

TEST(SweepAdvice, GpuCountsBeyondAnyClusterOrBelowOne) {
  SweepRequest r = testing::tiny_request();
  r.gpus = int64_t{1} << 40;
  EXPECT_THAT(error_of(r), HasSubstr("--gpus: must be <= 1048576"));
  r.gpus = 0;
  EXPECT_THAT(error_of(r), HasSubstr("--gpus: must be >= 1, got 0"));
}

TEST(SweepAdvice, GpuCountsTheClusterCannotHost) {
  SweepRequest r = testing::tiny_request();
  r.base.cluster = load_cluster("dgx-a100-80g");
  r.gpus = 12;
  EXPECT_EQ(error_of(r),
            "--gpus: 12 is not a whole number of nodes (8 GPUs per node on cluster "
            "'dgx-a100-80g'); use 8 or 16 GPUs (a count below one node may use part of it)");
  r.gpus = 6;  // part of one node
  EXPECT_EQ(error_of(r), "");
  r.gpus = 1024;
  EXPECT_EQ(error_of(r), "");
  r.gpus = 0;
  EXPECT_THAT(error_of(r), HasSubstr("--gpus: must be >= 1"));
  r = testing::tiny_request(8);  // h200x4: one node of 4, no network
  EXPECT_THAT(error_of(r), HasSubstr("--gpus: 8 GPUs need 2 nodes but cluster 'h200x4' "
                                     "describes no network between nodes; use at most 4 GPUs"));
  r = testing::tiny_request(4, 0);
  EXPECT_THAT(error_of(r), HasSubstr("--global-batch: must be >= 1, got 0"));
}

// 2 layers, 4 heads, sequence 16: on 3 GPUs tp 3 and cp 3 break the head and sequence rules,
// pp 3 has more stages than layers, dp 3 does not divide the batch of 8.
SweepRequest no_valid_request() {
  SweepRequest r = testing::tiny_request(3, 8);
  r.base.model = model_from_json(parse_json(R"({"name": "tiny2", "num_layers": 2,
      "hidden_size": 64, "num_attention_heads": 4, "ffn_hidden_size": 256, "vocab_size": 128,
      "seq_length": 16, "activation": "gelu", "normalization": "layernorm",
      "position_embedding": "learned", "tied_embeddings": true})",
                                            "tiny2"),
                                 "model");
  return r;
}

TEST(SweepAdvice, NoValidPlanNamesTheRulesAndNearbyCounts) {
  const SweepRequest r = no_valid_request();
  EXPECT_FALSE(has_valid_candidate(r));
  EXPECT_EQ(nearest_valid_gpus(r, -1), 2);
  EXPECT_EQ(nearest_valid_gpus(r, +1), 4);
  SweepOptions o;
  o.simulate = testing::fake_simulate;
  const SweepResult res = run_sweep(r, o);
  ASSERT_EQ(res.invalid, res.candidates);
  const std::string msg = explain_no_plan(r, res, o);
  EXPECT_THAT(msg, HasSubstr("--gpus: no valid plan for tiny2 on 3 GPUs of h200x4: all "));
  EXPECT_THAT(msg, HasSubstr("candidates break a rule, most often '"));
  EXPECT_THAT(msg, HasSubstr("; 2 or 4 GPUs have valid plans"));
  EXPECT_EQ(msg.find('\n'), std::string::npos);
}

TEST(SweepAdvice, NothingFitsSaysTheSmallestGpuCountThatDoes) {
  // Capacity = overhead + 0.75 GiB: the fake peak (bound + 1 GiB per micro-batch in flight,
  // 0.5 GiB less with sp) fits only with tp > 1 and sp, so never on 1 GPU; on 2 it does.
  SweepRequest r = testing::tiny_request(1, 8);
  r.base.cluster.gpu.memory_gib = r.base.cluster.gpu.runtime_overhead_gib + 0.75;
  SweepOptions o;
  o.simulate = testing::fake_simulate;
  const SweepResult res = run_sweep(r, o);
  ASSERT_EQ(res.fits, 0);
  ASSERT_GT(res.candidates - res.invalid, 0);
  EXPECT_EQ(smallest_fitting_gpus(r, o), 2);
  const std::string msg = explain_no_plan(r, res, o);
  EXPECT_THAT(msg, HasSubstr("--gpus: tiny does not fit on 1 GPUs of h200x4 (2.8 GiB each): all "));
  EXPECT_THAT(msg, HasSubstr("valid plans run out of memory, the leanest needs at least "));
  EXPECT_THAT(msg, HasSubstr("; it fits on 2 GPUs (--gpus 2)"));
  // Where no larger count fits either (the cluster has 4 GPUs), it says so.
  r.base.cluster.gpu.memory_gib = r.base.cluster.gpu.runtime_overhead_gib + 0.25;
  EXPECT_FALSE(smallest_fitting_gpus(r, o).has_value());
  EXPECT_THAT(explain_no_plan(r, run_sweep(r, o), o), HasSubstr("fits either"));
}

TEST(SweepAdvice, FixesThatLeaveNothing) {
  SweepRequest r = testing::tiny_request();
  r.fixed.tp = 3;
  SweepOptions o;
  o.simulate = testing::fake_simulate;
  const SweepResult res = run_sweep(r, o);
  ASSERT_EQ(res.candidates, 0);
  EXPECT_THAT(explain_no_plan(r, res, o),
              HasSubstr("--fix: no candidate for tiny on 4 GPUs of h200x4 with --fix tp=3"));
}

}  // namespace
}  // namespace mplan::sweep
