// Tests of the sweep's CSV: header, one row per simulated candidate with as many fields, ranks
// 1..fits on the fitting rows, values that parse back.
#include "sim/sweep/sweep_csv.hpp"

#include <gtest/gtest.h>

#include <set>
#include <sstream>

#include "tests/sim/sweep/sweep_test_util.hpp"

namespace mplan::sweep {
namespace {

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream ss(line);
  std::string f;
  while (std::getline(ss, f, ',')) out.push_back(f);
  if (!line.empty() && line.back() == ',') out.push_back("");
  return out;
}

TEST(SweepCsv, OneRowPerSimulatedCandidate) {
  SweepRequest req = testing::tiny_request();
  req.base.cluster.gpu.memory_gib = req.base.cluster.gpu.runtime_overhead_gib + 1.5;
  SweepOptions o;
  o.simulate = testing::fake_simulate;
  const SweepResult r = run_sweep(req, o);
  ASSERT_GT(r.out_of_memory, 0);
  std::stringstream in(sweep_csv(req, r));
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  const std::vector<std::string> header = split(line);
  ASSERT_EQ(header.size(), 42u);
  EXPECT_EQ(header[0], "schema_version");
  EXPECT_EQ(header[2], "rank");
  EXPECT_EQ(header.back(), "fits");
  auto col = [&](const std::string& name) {
    return static_cast<size_t>(std::find(header.begin(), header.end(), name) - header.begin());
  };
  std::set<int64_t> ranks;
  std::set<std::string> seen_strategies;
  int64_t rows = 0, fitting = 0;
  while (std::getline(in, line)) {
    const std::vector<std::string> f = split(line);
    ASSERT_EQ(f.size(), header.size()) << line;
    EXPECT_EQ(f[0], "2");  // schema_version
    const bool fits = f[col("fits")] == "1";
    EXPECT_EQ(fits, !f[col("rank")].empty());
    if (fits) {
      ranks.insert(std::stoll(f[col("rank")]));
      ++fitting;
    }
    const int64_t tp = std::stoll(f[col("tp")]), cp = std::stoll(f[col("cp")]),
                  pp = std::stoll(f[col("pp")]), dp = std::stoll(f[col("dp")]);
    EXPECT_EQ(tp * cp * pp * dp, 4);
    EXPECT_GT(std::stod(f[col("tokens_per_s")]), 0);
    EXPECT_TRUE(f[col("recompute")] == "none" || f[col("recompute")] == "selective" ||
                f[col("recompute")] == "full");
    // FSDP rows name their strategy and run the distributed optimizer; overlap needs sp.
    const bool fsdp = f[col("use_megatron_fsdp")] == "1";
    const std::string strategy = f[col("data_parallel_sharding_strategy")];
    EXPECT_EQ(fsdp, !strategy.empty());
    if (fsdp) {
      EXPECT_EQ(f[col("distributed_optimizer")], "1");
    }
    if (fsdp) seen_strategies.insert(strategy);
    if (f[col("tp_comm_overlap")] == "1") {
      EXPECT_EQ(f[col("sequence_parallel")], "1");
    }
    ++rows;
  }
  EXPECT_EQ(rows, r.simulated);
  EXPECT_EQ(seen_strategies, (std::set<std::string>{"optim_grads", "optim_grads_params"}));
  EXPECT_EQ(fitting, r.fits);
  ASSERT_FALSE(ranks.empty());
  EXPECT_EQ(*ranks.begin(), 1);
  EXPECT_EQ(*ranks.rbegin(), r.fits);
  EXPECT_EQ(static_cast<int64_t>(ranks.size()), r.fits);
}

}  // namespace
}  // namespace mplan::sweep
