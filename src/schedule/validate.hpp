// validate(schedule): whether a schedule can run as written under blocking grouped p2p, and if
// not, the first violation: structure (ranks, indices, peers, p2p groups); per rank, every
// (micro-batch, chunk) forwarded and backwarded exactly once (W once when split), each backward
// after its forward and each W after its B, each receive before the pass that needs it and each
// send after the pass that produces it; across ranks, the k-th send to a peer meets the k-th
// receive there, carrying the same tensor; and the groups can all complete (no deadlock).
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
