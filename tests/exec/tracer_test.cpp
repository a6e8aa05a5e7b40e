// Tracer on the CPU backend: spans between marks, in ns from the iteration's first mark, in the
// order they were recorded; around() brackets a call; clear() starts over; on a synchronous
// backend every span has finished.
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

}  // namespace
}  // namespace mplan::exec
