// validate(schedule): whether a schedule runs as written under blocking grouped p2p, else the
// first violation: structure (indices, peers, groups); per rank, each (micro-batch, chunk) F and B
// once (W once when split; only F, and no backward transfer, when forward_only), B after F, W
// after B, receives before and sends after their pass;
// across ranks, the k-th send to a peer meets the k-th receive there with the same tensor; and
// the blocking groups can all complete (no deadlock).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "src/schedule/schedule.hpp"

namespace mplan {

struct ScheduleViolation {
  int64_t rank = -1;   // pipeline rank concerned, -1 for the whole schedule
  int64_t index = -1;  // position in that rank's action list, -1 when not about one action
  std::string message;
};

std::optional<ScheduleViolation> validate(const Schedule& schedule);
// "rank 2, action 17: <message>" / "rank 2: <message>" / "<message>".
std::string to_string(const ScheduleViolation& v);

}  // namespace mplan
