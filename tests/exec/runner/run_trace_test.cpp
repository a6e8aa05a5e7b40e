// The measured trace's schema: the simulator's thread names (compute, dp, pp_send_fwd, ...),
// complete events with micro-batch and chunk args, µs from the iteration's first mark, and one
// document with every rank's events.
#include "exec/runner/run_trace.hpp"

#include <gtest/gtest.h>

namespace mplan::exec {
namespace {

TEST(RunTrace, EventsInTheSimulatorsSchema) {
  TraceSpan f;
  f.name = "forward";
  f.microbatch = 2;
  f.chunk = 1;
  TraceSpan r;
  r.name = "recv_bwd";
  r.kind = SpanKind::kP2p;
  r.stream = TraceStream::kRecvBwd;
  r.peer = 3;
  r.bytes = 4096;
  const Json e = rank_trace_events({{&f, 1000, 3000}, {&r, 3000, 3500}}, 7, "rank 7 (stage 1)");
  std::map<int, std::string> threads;
  std::vector<Json> x;
  for (const Json& ev : e) {
    EXPECT_EQ(ev["pid"], 7);
    if (ev["ph"] == "M" && ev["name"] == "thread_name")
      threads[ev["tid"].get<int>()] = ev["args"]["name"];
    if (ev["ph"] == "X") x.push_back(ev);
  }
  EXPECT_EQ(threads.at(0), "compute");
  EXPECT_EQ(threads.at(1), "dp");
  EXPECT_EQ(threads.at(5), "pp_recv_bwd");
  ASSERT_EQ(x.size(), 2u);
  EXPECT_EQ(x[0]["name"], "forward");
  EXPECT_EQ(x[0]["ts"].get<double>(), 1.0);
  EXPECT_EQ(x[0]["dur"].get<double>(), 2.0);
  EXPECT_EQ(x[0]["args"]["microbatch"], 2);
  EXPECT_EQ(x[0]["args"]["chunk"], 1);
  EXPECT_EQ(x[0]["cat"], "compute");
  EXPECT_EQ(x[1]["cat"], "recv");  // the simulator's categories: compute, send, recv, collective
  EXPECT_EQ(x[1]["tid"], 5);
  EXPECT_EQ(x[1]["args"]["peer"], 3);
  const Json doc = run_trace_document({e, e});
  EXPECT_EQ(doc["schema_version"], 1);
  EXPECT_EQ(doc["traceEvents"].size(), 2 * e.size());
}

}  // namespace
}  // namespace mplan::exec
