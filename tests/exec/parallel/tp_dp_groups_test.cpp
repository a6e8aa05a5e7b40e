// tp_dp_group_members(): Megatron's groups for order tp-cp-ep-dp-pp with cp = ep = pp = 1, as in
// parallel_state's docstring (tp 2: tensor groups [g0, g1], [g2, g3]; data groups [g0, g2],
// [g1, g3]).
#include "exec/parallel/tp_dp_groups.hpp"

#include <gtest/gtest.h>

namespace mplan::exec {
namespace {

using V = std::vector<int>;

TEST(TpDpGroups, TwoByTwo) {
  GroupMembers g = tp_dp_group_members(2, 2, 3);
  EXPECT_EQ(g.at("tp"), (V{2, 3}));
  EXPECT_EQ(g.at("dp"), (V{1, 3}));
  EXPECT_EQ(g.at("tp-dp"), (V{0, 1, 2, 3}));
  EXPECT_EQ(tp_dp_group_members(2, 2, 0).at("dp"), (V{0, 2}));
}

TEST(TpDpGroups, PureLayouts) {
  EXPECT_EQ(tp_dp_group_members(4, 1, 2).at("tp"), (V{0, 1, 2, 3}));
  EXPECT_EQ(tp_dp_group_members(4, 1, 2).at("dp"), (V{2}));
  EXPECT_EQ(tp_dp_group_members(1, 4, 2).at("tp"), (V{2}));
  EXPECT_EQ(tp_dp_group_members(1, 4, 2).at("dp"), (V{0, 1, 2, 3}));
  EXPECT_EQ(tp_dp_group_members(2, 4, 5).at("dp"), (V{1, 3, 5, 7}));
  EXPECT_THROW(tp_dp_group_members(2, 2, 4), InternalError);
}

}  // namespace
}  // namespace mplan::exec
