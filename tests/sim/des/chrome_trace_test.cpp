// Chrome trace export: processes are ranks, threads are streams, ops are complete events in
// microseconds, and the memory timeline becomes counter events.
#include "sim/des/chrome_trace.hpp"

#include <gtest/gtest.h>

#include "sim/des/engine.hpp"

namespace mplan::des {
namespace {

TEST(ChromeTrace, OneCompleteEventPerOpWithRankAndStream) {
  Program p(2, 2);
  p.set_stream_name(1, "tp");
  uint16_t fwd = p.intern_name("forward");
  OpId a = p.add_op(0, 0, 1500, {fwd, 2, 5});
  RendezvousId rv = p.add_rendezvous(2, 500);
  p.join(0, 1, rv, OpKind::kCollective);
  p.join(1, 1, rv, OpKind::kCollective);
  p.add_wait(a + 1, a);
  p.add_memory(a, MemWhen::kAtStart, 0, int64_t{1} << 30);
  RunOptions opt;
  opt.record_memory_timeline = true;
  SimResult r = simulate(p, opt);
  TraceOptions topt;
  topt.rank_names = {"stage 0", "stage 1"};
  Json doc = chrome_trace(p, r, topt);
  EXPECT_EQ(doc["schema_version"], kTraceSchemaVersion);
  int complete = 0, counters = 0;
  bool saw_tp_name = false, saw_stage1 = false;
  for (const Json& e : doc["traceEvents"]) {
    if (e["ph"] == "X") {
      ++complete;
      if (e["name"] == "forward") {
        EXPECT_EQ(e["pid"], 0);
        EXPECT_EQ(e["tid"], 0);
        EXPECT_DOUBLE_EQ(e["ts"].get<double>(), 0.0);
        EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 1.5);
        EXPECT_EQ(e["args"]["microbatch"], 2);
        EXPECT_EQ(e["args"]["chunk"], 5);
      } else {
        EXPECT_EQ(e["cat"], "collective");
        EXPECT_EQ(e["tid"], 1);
        EXPECT_DOUBLE_EQ(e["ts"].get<double>(), 1.5);
        EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 0.5);
      }
    } else if (e["ph"] == "C") {
      ++counters;
      EXPECT_DOUBLE_EQ(e["args"]["GiB"].get<double>(), 1.0);
    } else if (e["name"] == "thread_name" && e["tid"] == 1) {
      saw_tp_name = e["args"]["name"] == "tp";
    } else if (e["name"] == "process_name" && e["pid"] == 1) {
      saw_stage1 = e["args"]["name"] == "stage 1";
    }
  }
  EXPECT_EQ(complete, 3);
  EXPECT_EQ(counters, 1);
  EXPECT_TRUE(saw_tp_name);
  EXPECT_TRUE(saw_stage1);
}

TEST(ChromeTrace, SegmentsAreNestedBackToBackFromTheOpStart) {
  Program p(1, 1);
  uint16_t layer = p.intern_name("layer");
  uint16_t qkv = p.intern_name("qkv");
  uint16_t ar = p.intern_name("all_reduce");
  p.add_op(0, 0, 3000);
  OpId op = p.add_op(0, 0, 1000, {layer, 0, 0});
  p.add_segment(op, qkv, 600);
  p.add_segment(op, ar, 400, OpKind::kCollective);
  SimResult r = simulate(p);
  Json doc = chrome_trace(p, r);
  std::vector<std::pair<std::string, double>> seen;  // (name, ts) of the segments
  for (const Json& e : doc["traceEvents"])
    if (e["ph"] == "X" && e["name"] != "op" && e["name"] != "layer")
      seen.push_back({e["name"].get<std::string>(), e["ts"].get<double>()});
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].first, "qkv");
  EXPECT_DOUBLE_EQ(seen[0].second, 3.0);
  EXPECT_EQ(seen[1].first, "all_reduce");
  EXPECT_DOUBLE_EQ(seen[1].second, 3.6);
}

}  // namespace
}  // namespace mplan::des
