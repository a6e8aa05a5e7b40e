// Timeline: start and end of every action of a schedule under given per-action costs, from a
// dependency-driven pass (run_rendezvous): each rank runs its actions in order, a compute action
// takes its cost, a p2p group waits until every peer has reached the matching group, transfers
// take no time. Also the per-rank analytics: busy time, makespan, bubble fraction, and the peak
// number of (micro-batch, chunk) activations in flight.
#pragma once

#include <cstdint>
#include <vector>

#include "src/schedule/schedule.hpp"

namespace mplan {

// Cost of one action, in any time unit. Costs are per model chunk: with vpp chunks per rank a
// chunk holds 1/vpp of the rank's layers. In a schedule that splits the backward (zb-h1), B
// costs `backward` and W costs `weight`; otherwise B is the whole backward, backward + weight.
struct ActionCosts {
  double forward = 1.0;
  double backward = 2.0;
  double weight = 0.0;
  bool operator==(const ActionCosts&) const = default;
};

double action_cost(const Schedule& s, const ActionCosts& c, const Action& a);

struct Timeline {
  std::vector<double> start;     // per action, indexed like Schedule::actions; p2p: group posted
  std::vector<double> end;       // compute: start + cost; p2p: group completed
  std::vector<double> busy;      // per rank: total compute time
  double makespan = 0.0;         // when the last rank finishes
  double bubble_fraction = 0.0;  // idle share: 1 - sum(busy) / (pp * makespan)
};

// Requires a valid schedule (validate()); a broken one is an InternalError.
Timeline time_schedule(const Schedule& s, const ActionCosts& costs);

// Per rank: the most (micro-batch, chunk) pairs whose activations are alive at once; one is
// alive from the start of its F to the end of its B, or of its W when the backward is split
// (forward_only: to the end of its F).
std::vector<int64_t> peak_inflight(const Schedule& s);

}  // namespace mplan
