// Published runs: the records become the plans the rules say (micro-batch 1 and the smallest
// interleaving for what SC'21 leaves out; the papers' own layouts otherwise), and — a regression
// check, not a timing test — the median |error| of the simulated iteration times against the
// published ones stays under 10 % with the dgx-a100-80g profile (reports/published-calibration.md).
#include "sim/calibration/published_runs.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include "src/common/error.hpp"

namespace mplan::sim {
namespace {

Json records() {
  const std::string path =
      std::string(MPLAN_SOURCE_DIR) + "/sim/calibration/published_calibration.json";
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return parse_json(ss.str(), path);
}

std::map<std::string, PublishedRun> by_id(const std::vector<PublishedRun>& runs) {
  std::map<std::string, PublishedRun> m;
  for (const PublishedRun& r : runs) m[r.id] = r;
  return m;
}

TEST(PublishedRuns, RecordsBecomePlans) {
  const auto runs = published_runs(records(), load_cluster("dgx-a100-80g"));
  ASSERT_EQ(runs.size(), 18u);
  const auto m = by_id(runs);
  // SC'21 Table 1, 1T: 3072 GPUs = tp 8 x pp 64 x dp 6, batch 3072; mb and vpp filled in.
  const PublishedRun& t = m.at("sc21_t1_1008.0B");
  EXPECT_EQ(t.plan.world_size(), 3072);
  EXPECT_EQ(t.plan.parallel.micro_batch_size, 1);
  EXPECT_EQ(t.plan.parallel.vpp, 2);  // 2 layers per stage
  EXPECT_EQ(t.plan.parallel.schedule, ScheduleKind::kInterleaved);
  EXPECT_EQ(t.plan.parallel.recompute, Recompute::kFull);
  EXPECT_EQ(t.plan.model.num_layers, 128);
  EXPECT_NEAR(t.published_time_s, 102.63, 1e-9);
  EXPECT_EQ(m.at("sc21_t1_529.6B").plan.parallel.vpp, 3);  // 3 layers per stage
  EXPECT_EQ(m.at("sc21_t1_76.1B").plan.parallel.vpp, 3);   // 15 layers per stage
  EXPECT_EQ(m.at("sc21_t1_1.7B").plan.parallel.vpp, 1);    // no pipeline
  // Korthikanti et al., 175B: as published (vpp 3, sequence parallel, selective recompute).
  const PublishedRun& k = m.at("korthikanti_t5_175B_present");
  EXPECT_EQ(k.plan.parallel.vpp, 3);
  EXPECT_TRUE(k.plan.parallel.sequence_parallel);
  EXPECT_EQ(k.plan.parallel.recompute, Recompute::kSelective);
  EXPECT_EQ(k.plan.training.attention_backend, AttentionBackend::kUnfused);
  EXPECT_NEAR(k.published_time_s, 13.75, 1e-9);
  EXPECT_TRUE(k.filled.empty());
}

TEST(PublishedRuns, MedianErrorStaysUnderTenPercent) {
  const auto runs = published_runs(records(), load_cluster("dgx-a100-80g"));
  const auto rows = simulate_published(runs);
  ASSERT_EQ(rows.size(), runs.size());
  for (const CalibrationRow& r : rows) {
    EXPECT_GT(r.predicted_s, 0) << r.id;
    EXPECT_LT(std::abs(r.error), 0.25) << r.id;  // no run far off
  }
  EXPECT_LT(median_abs_error(rows), 0.10);
}

TEST(PublishedRuns, MedianOfAbsoluteErrors) {
  std::vector<CalibrationRow> rows(4);
  rows[0].error = -0.3, rows[1].error = 0.1, rows[2].error = 0.2, rows[3].error = -0.05;
  EXPECT_DOUBLE_EQ(median_abs_error(rows), 0.15);
  rows.pop_back();
  EXPECT_DOUBLE_EQ(median_abs_error(rows), 0.2);
  EXPECT_EQ(median_abs_error({}), 0);
}

TEST(PublishedRuns, BadRecordIsAnError) {
  Json doc = records();
  doc["runs"][0]["parallel"].erase("tp");
  EXPECT_THROW(published_runs(doc, load_cluster("dgx-a100-80g")), Error);
}

}  // namespace
}  // namespace mplan::sim
