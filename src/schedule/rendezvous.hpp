// Blocking grouped point-to-point semantics, shared by validate() and the timing pass.
// match_p2p pairs the k-th send from rank a to rank b with the k-th receive on b from a (the
// order in which NCCL and MPI match messages between two ranks). run_rendezvous runs every rank
// through its actions: a compute action takes its cost; a p2p group is posted when the rank
// reaches it and completes when the group holding each action's partner has been posted too.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "src/schedule/schedule.hpp"

namespace mplan {

// partner[i]: flat index of the action that action i exchanges a tensor with; -1 for compute
// actions and for p2p actions without a counterpart.
std::vector<int64_t> match_p2p(const Schedule& s);

struct RendezvousRun {
  std::vector<double> start;   // per action; p2p: when its group was posted
  std::vector<double> end;     // per action; p2p: when its group completed
  std::vector<int64_t> stuck;  // per rank: flat index of the group it waits on forever, or -1
  bool completed = false;
};

// Requires every p2p action to be matched and every p2p group to end with ends_group.
RendezvousRun run_rendezvous(const Schedule& s, const std::vector<int64_t>& partner,
                             const std::function<double(const Action&)>& cost);

}  // namespace mplan
