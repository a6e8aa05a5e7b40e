// The timing pass and per-rank analytics. Linear in the number of actions.
#include "src/schedule/timeline.hpp"

#include <algorithm>

#include "src/common/error.hpp"
#include "src/schedule/rendezvous.hpp"

namespace mplan {

double action_cost(const Schedule& s, const ActionCosts& c, const Action& a) {
  switch (a.kind) {
    case ActionKind::kForward:
      return c.forward;
    case ActionKind::kBackward:
      return s.split_backward ? c.backward : c.backward + c.weight;
    case ActionKind::kWeightGrad:
      return c.weight;
    default:
      return 0.0;
  }
}

Timeline time_schedule(const Schedule& s, const ActionCosts& costs) {
  const std::vector<int64_t> partner = match_p2p(s);
  RendezvousRun run =
      run_rendezvous(s, partner, [&](const Action& a) { return action_cost(s, costs, a); });
  MPLAN_CHECK(run.completed, "time_schedule on a schedule that deadlocks (run validate())");
  Timeline t;
  t.start = std::move(run.start);
  t.end = std::move(run.end);
  t.busy.assign(s.pp(), 0.0);
  double total_busy = 0.0;
  for (int64_t r = 0; r < s.pp(); ++r) {
    for (int64_t i = s.rank_begin[r]; i < s.rank_begin[r + 1]; ++i) {
      if (is_compute(s.actions[i].kind)) t.busy[r] += t.end[i] - t.start[i];
      t.makespan = std::max(t.makespan, t.end[i]);
    }
    total_busy += t.busy[r];
  }
  t.bubble_fraction =
      t.makespan > 0 ? 1.0 - total_busy / (static_cast<double>(s.pp()) * t.makespan) : 0.0;
  return t;
}

std::vector<int64_t> peak_inflight(const Schedule& s) {
  const ActionKind frees = s.split_backward ? ActionKind::kWeightGrad : ActionKind::kBackward;
  std::vector<int64_t> peak(s.pp(), 0);
  for (int64_t r = 0; r < s.pp(); ++r) {
    int64_t alive = 0;
    for (const Action& a : s.rank(r)) {
      if (a.kind == ActionKind::kForward) peak[r] = std::max(peak[r], ++alive);
      if (a.kind == frees || (s.spec.forward_only && a.kind == ActionKind::kForward)) --alive;
    }
  }
  return peak;
}

}  // namespace mplan
