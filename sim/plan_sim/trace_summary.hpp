// The summary level of a simulated iteration's Chrome trace (`mplan simulate --trace`, the
// default): one complete event per op the engine ran — a forward, backward or weight-gradient
// pass of one micro-batch and model chunk (one schedule action), a send or receive, a gradient
// bucket, the optimizer step — and the memory counters, without the per-kernel slices that
// write_trace() nests in each op (`--trace-level ops`). Invariant: the same processes, threads,
// op events and schema as write_trace(), so both open side by side in Perfetto.
#pragma once

#include <ostream>

#include "sim/plan_sim/simulate.hpp"

namespace mplan::sim {

enum class TraceLevel { kSummary, kOps };

// Writes `result` (simulated with SimOptions::record_trace) at `level`: kOps is write_trace().
// Events are written one at a time, so memory stays flat however long the trace.
void write_trace(std::ostream& os, const SimulationResult& result, TraceLevel level);

}  // namespace mplan::sim
