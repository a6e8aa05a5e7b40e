// The --json document: keys, order and values for a small hand-timed case.
#include "src/schedule/schedule_json.hpp"

#include <gtest/gtest.h>

namespace mplan {
namespace {

TEST(ScheduleJson, ShapeAndValues) {
  ScheduleSpec spec;
  spec.pp = 2;
  spec.microbatches = 2;
  const Schedule s = make_schedule(spec);
  const Json j = schedule_to_json(s, time_schedule(s, {1, 2, 0}));
  std::vector<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it) keys.push_back(it.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"pp", "microbatches", "vpp", "schedule", "ranks",
                                            "makespan", "bubble_fraction"}));
  EXPECT_EQ(j["pp"], 2);
  EXPECT_EQ(j["microbatches"], 2);
  EXPECT_EQ(j["vpp"], 1);
  EXPECT_EQ(j["schedule"], "1f1b");
  EXPECT_EQ(j["makespan"], 9.0);
  EXPECT_DOUBLE_EQ(j["bubble_fraction"].get<double>(), 1.0 / 3.0);
  ASSERT_EQ(j["ranks"].size(), 2u);
  const Json& r0 = j["ranks"][0];
  std::vector<std::string> rank_keys;
  for (auto it = r0.begin(); it != r0.end(); ++it) rank_keys.push_back(it.key());
  EXPECT_EQ(rank_keys, (std::vector<std::string>{"rank", "warmup", "ops", "peak_inflight"}));
  EXPECT_EQ(r0["warmup"], 1);
  EXPECT_EQ(r0["peak_inflight"], 2);
  EXPECT_EQ(j["ranks"][1]["peak_inflight"], 1);
  // Rank 0: F0 [sf0] F1 [sf1 rb0] B0 [rb1] B1.
  const Json& ops = r0["ops"];
  ASSERT_EQ(ops.size(), 8u);
  EXPECT_EQ(ops[0], Json::parse(R"({"op": "F", "microbatch": 0, "chunk": 0, "start": 0.0,
                                    "end": 1.0})"));
  EXPECT_EQ(ops[3], Json::parse(R"({"op": "send-forward", "microbatch": 1, "chunk": 0,
                                    "peer": 1, "start": 2.0, "end": 4.0})"));
  EXPECT_EQ(ops[4], Json::parse(R"({"op": "recv-backward", "microbatch": 0, "chunk": 0,
                                    "peer": 1, "start": 2.0, "end": 4.0})"));
  EXPECT_EQ(ops[5]["op"], "B");
  EXPECT_EQ(ops[5]["start"], 4.0);
  EXPECT_FALSE(ops[5].contains("peer"));
  EXPECT_EQ(ops[7]["end"], 9.0);
}

}  // namespace
}  // namespace mplan
