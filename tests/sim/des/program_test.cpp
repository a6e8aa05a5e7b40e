// Program: stream order, rendezvous membership, names and the checks on bad ids.
#include "sim/des/program.hpp"

#include <gtest/gtest.h>

#include "src/common/error.hpp"

namespace mplan::des {
namespace {

TEST(Program, OpsChainPerStreamInAddOrder) {
  Program p(2, 3);
  OpId a = p.add_op(0, 1, 10);
  OpId b = p.add_op(1, 1, 10);
  OpId c = p.add_op(0, 1, 10);
  OpId d = p.add_op(0, 2, 10);
  EXPECT_EQ(p.stream_first(p.stream_index(0, 1)), a);
  EXPECT_EQ(p.op(a).next_in_stream, c);
  EXPECT_EQ(p.op(c).next_in_stream, kNone);
  EXPECT_EQ(p.stream_last(p.stream_index(0, 1)), c);
  EXPECT_EQ(p.stream_last(p.stream_index(0, 0)), kNone);
  EXPECT_EQ(p.stream_first(p.stream_index(1, 1)), b);
  EXPECT_EQ(p.stream_first(p.stream_index(0, 2)), d);
  EXPECT_EQ(p.stream_first(p.stream_index(0, 0)), kNone);
  EXPECT_EQ(p.num_streams(), 6);
  EXPECT_EQ(p.stream_index(1, 2), 5);
}

TEST(Program, RendezvousMembersAreLinked) {
  Program p(3, 1);
  RendezvousId rv = p.add_rendezvous(3, 100);
  OpId m0 = p.join(2, 0, rv, OpKind::kCollective);
  OpId m1 = p.join(0, 0, rv, OpKind::kCollective);
  OpId m2 = p.join(1, 0, rv, OpKind::kCollective);
  EXPECT_EQ(p.rendezvous()[rv].first_member, m0);
  EXPECT_EQ(p.op(m0).next_member, m1);
  EXPECT_EQ(p.op(m1).next_member, m2);
  EXPECT_EQ(p.rendezvous()[rv].num_members, 3);
  EXPECT_THROW(p.join(0, 0, rv, OpKind::kCollective), InternalError);  // a fourth member
}

TEST(Program, NamesAreInternedOnce) {
  Program p(1, 1);
  uint16_t f = p.intern_name("forward");
  EXPECT_EQ(p.intern_name("backward"), f + 1);
  EXPECT_EQ(p.intern_name("forward"), f);
  EXPECT_EQ(p.names()[0], "op");
  p.reset(1, 1);
  EXPECT_EQ(p.names().size(), 1u);
}

TEST(Program, BadIdsAreInternalErrors) {
  Program p(2, 2);
  EXPECT_THROW(p.add_op(2, 0, 1), InternalError);
  EXPECT_THROW(p.add_op(0, 2, 1), InternalError);
  EXPECT_THROW(p.add_op(0, 0, -1), InternalError);
  OpId a = p.add_op(0, 0, 1);
  EXPECT_THROW(p.add_wait(a, 5), InternalError);
  EXPECT_THROW(p.add_memory(a, MemWhen::kAtStart, kMaxMemClasses, 1), InternalError);
  EXPECT_THROW(p.join(0, 0, 3, OpKind::kSend), InternalError);
  EXPECT_THROW(p.add_rendezvous(0, 1), InternalError);
  EXPECT_THROW(p.add_op(0, 0, 1, OpLabel{7, -1, -1}), InternalError);  // name not interned
}

TEST(Program, ResetKeepsNothingButCapacity) {
  Program p(1, 1);
  for (int i = 0; i < 100; ++i) p.add_op(0, 0, 1);
  p.set_initial_memory(0, 1, 5);
  p.reset(2, 4);
  EXPECT_EQ(p.num_ops(), 0);
  EXPECT_EQ(p.num_streams(), 8);
  EXPECT_EQ(p.initial_memory(0)[1], 0);
  EXPECT_EQ(p.stream_name(3), "stream 3");
}

}  // namespace
}  // namespace mplan::des
