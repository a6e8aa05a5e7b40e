// The measured time breakdown of one traced iteration on one rank, in the simulator's categories
// and by its definitions (sim/plan_sim/simulate.hpp, TimeBreakdown): the compute stream's
// timeline from the iteration's first mark to its last is cut into passes (compute, less the
// tensor-parallel collectives run inside them), tensor-parallel collectives, pipeline p2p groups,
// exposed data-parallel work, the optimizer, and gaps. A p2p group's time is its transfer plus
// the wait for the peer: the transfer is taken as the shortest group of the same size on the
// rank (a group that found its peer ready), the rest counts as bubble, as do gaps.
// Invariant: the parts add up to the measured iteration (total_s).
#pragma once

#include <vector>

#include "exec/tracer.hpp"

namespace mplan::exec {

struct MeasuredBreakdown {
  double compute_s = 0;
  double tp_comm_s = 0;
  double pp_comm_s = 0;
  double dp_comm_s = 0;
  double bubble_s = 0;
  double optimizer_s = 0;
  double total_s = 0;  // first to last compute-stream mark
};

MeasuredBreakdown measure_breakdown(const std::vector<Tracer::Timed>& spans);

}  // namespace mplan::exec
