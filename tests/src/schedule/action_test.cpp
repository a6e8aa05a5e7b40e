// Action: kinds, names (the JSON "op" values), text forms, size.
#include "src/schedule/action.hpp"

#include <gtest/gtest.h>

namespace mplan {
namespace {

TEST(Action, KindNames) {
  EXPECT_STREQ(to_string(ActionKind::kForward), "F");
  EXPECT_STREQ(to_string(ActionKind::kBackward), "B");
  EXPECT_STREQ(to_string(ActionKind::kWeightGrad), "W");
  EXPECT_STREQ(to_string(ActionKind::kSendForward), "send-forward");
  EXPECT_STREQ(to_string(ActionKind::kRecvForward), "recv-forward");
  EXPECT_STREQ(to_string(ActionKind::kSendBackward), "send-backward");
  EXPECT_STREQ(to_string(ActionKind::kRecvBackward), "recv-backward");
}

TEST(Action, Classes) {
  EXPECT_TRUE(is_compute(ActionKind::kWeightGrad));
  EXPECT_FALSE(is_compute(ActionKind::kSendForward));
  EXPECT_TRUE(is_send(ActionKind::kSendBackward));
  EXPECT_TRUE(is_recv(ActionKind::kRecvForward));
  EXPECT_FALSE(is_recv(ActionKind::kSendForward));
  EXPECT_TRUE(is_forward_direction(ActionKind::kRecvForward));
  EXPECT_FALSE(is_forward_direction(ActionKind::kRecvBackward));
  EXPECT_EQ(sizeof(Action), 12u);
}

TEST(Action, TextForms) {
  EXPECT_EQ(to_string(compute_action(ActionKind::kForward, 3, 1)), "F3.1");
  EXPECT_EQ(to_string(compute_action(ActionKind::kBackward, 3, 1), false), "B3");
  EXPECT_EQ(to_string(p2p_action(ActionKind::kSendForward, 3, 1, 2, true)),
            "send-forward 3.1 -> 2");
  EXPECT_EQ(to_string(p2p_action(ActionKind::kRecvBackward, 0, 0, 1, false)),
            "recv-backward 0.0 <- 1");
  EXPECT_EQ(describe(compute_action(ActionKind::kWeightGrad, 4, 0)), "W (micro-batch 4, chunk 0)");
  EXPECT_EQ(describe(p2p_action(ActionKind::kRecvForward, 2, 1, 3, true)),
            "recv-forward (micro-batch 2, chunk 1) from rank 3");
}

}  // namespace
}  // namespace mplan
