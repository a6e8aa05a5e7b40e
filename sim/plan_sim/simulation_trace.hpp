// SimulationTrace: what write_trace() needs from a simulation run with record_trace — a copy of
// the simulated program (ops, kernel-level segments, names) and its timings and memory timeline.
// Invariant: result.ops has one timing per op of program.
#pragma once

#include "sim/des/chrome_trace.hpp"
#include "sim/des/program.hpp"
#include "sim/des/sim_result.hpp"

namespace mplan::sim {

struct SimulationTrace {
  des::Program program;
  des::SimResult result;
  des::TraceOptions options;  // rank names
};

}  // namespace mplan::sim
