// Tracer on the CPU backend: spans between marks, in ns from the iteration's first mark, in the
// order they were recorded; around() brackets a call; clear() starts over; on a synchronous
// backend every span has finished; restore() brings back a recorded iteration's spans over its
// marks (a graph's replay).
#include "exec/tracer.hpp"

#include <gtest/gtest.h>

#include <thread>

#include "exec/cpu/cpu_backend.hpp"

namespace mplan::exec {
namespace {

TEST(Tracer, SpansBetweenMarks) {
  CpuBackend be;
  Tracer t(be);
  t.clear();
  TraceSpan a;
  a.name = "forward";
  a.microbatch = 3;
  t.around(a, [] { std::this_thread::sleep_for(std::chrono::milliseconds(2)); });
  TraceSpan b;
  b.name = "recv_fwd";
  b.kind = SpanKind::kP2p;
  b.stream = TraceStream::kRecvFwd;
  b.begin = t.mark(Stream::kCompute);
  b.end = t.mark(Stream::kCompute);
  t.add(b);
  const auto timed = t.timed();
  ASSERT_EQ(timed.size(), 2u);
  EXPECT_EQ(timed[0].begin_ns, 0);
  EXPECT_GE(timed[0].end_ns - timed[0].begin_ns, 2000000);
  EXPECT_EQ(timed[0].span->microbatch, 3);
  EXPECT_GE(timed[1].begin_ns, timed[0].end_ns);
  TraceSpan stuck;
  size_t finished = 0;
  EXPECT_FALSE(t.first_unfinished(stuck, finished));
  EXPECT_EQ(finished, 2u);
  t.clear();
  EXPECT_TRUE(t.spans().empty());
  EXPECT_STREQ(to_string(TraceStream::kSendBwd), "pp_send_bwd");
  TraceSpan bad;
  bad.begin = 5;
  bad.end = 2;
  EXPECT_THROW(t.add(bad), InternalError);
}

TEST(Tracer, RestoreKeepsARecordingsSpansAndMarks) {
  CpuBackend be;
  Tracer t(be);
  t.clear();
  TraceSpan a;
  a.name = "forward";
  t.around(a, [] {});
  const std::vector<TraceSpan> recorded = t.spans();
  const int marks = t.mark(Stream::kCompute) + 1;  // 3: the span's two and this one
  TraceSpan opt;
  opt.name = "optimizer";
  opt.kind = SpanKind::kOptimizer;
  t.around(opt, [] {});  // after the recording: marks 3 and 4
  ASSERT_EQ(t.spans().size(), 2u);
  t.restore(recorded, marks);
  ASSERT_EQ(t.spans().size(), 1u);
  EXPECT_EQ(t.spans()[0].name, "forward");
  EXPECT_EQ(t.mark(Stream::kCompute), marks);  // the next mark follows the recording's
  // A span past the marks restored is refused, and so are more marks than were taken.
  TraceSpan late = recorded[0];
  late.end = marks;
  EXPECT_THROW(t.restore({late}, marks), InternalError);
  EXPECT_THROW(t.restore(recorded, 99), InternalError);
}

}  // namespace
}  // namespace mplan::exec
