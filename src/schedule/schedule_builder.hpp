// ScheduleBuilder: appends the actions of each pipeline rank, in rank order, into one flat
// Schedule. P2P actions are collected into a group and written in a fixed order (send-forward,
// recv-forward, send-backward, recv-backward) so that, at pp 2 where the previous and the next
// rank are the same peer, the k-th send to a peer always meets the k-th receive there.
#pragma once

#include <array>
#include <cstdint>

#include "src/schedule/schedule.hpp"

namespace mplan {

class ScheduleBuilder {
 public:
  // `actions_per_rank` is a capacity hint (an upper bound avoids reallocation).
  ScheduleBuilder(const ScheduleSpec& spec, bool split_backward, int64_t actions_per_rank);

  void begin_rank(int64_t rank);  // ranks 0 .. pp-1, in order
  void compute(ActionKind kind, int64_t microbatch, int64_t chunk);
  // Adds one transfer to the open group (at most one of each kind per group).
  void p2p(ActionKind kind, int64_t microbatch, int64_t chunk, int64_t peer);
  // Writes the open group, if it has any transfer, and closes it.
  void end_group();
  Schedule finish();

 private:
  Schedule s_;
  int64_t rank_ = -1;
  std::array<Action, 4> group_{};
  int group_size_ = 0;
};

}  // namespace mplan
