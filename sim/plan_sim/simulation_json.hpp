// The JSON document of a simulation (`mplan simulate --json`, the sweep's per-plan records):
// iteration time, throughput, FLOP rates, the time breakdown and the memory per stage.
// Invariant: carries schema_version; sizes are integer bytes, times seconds.
#pragma once

#include "sim/plan_sim/simulate.hpp"
#include "src/common/json_reader.hpp"

namespace mplan::sim {

inline constexpr int kSimulationSchemaVersion = 1;

Json simulation_to_json(const SimulationResult& r);
// {compute_s, tp_comm_s, cp_comm_s, ep_comm_s, pp_comm_s, dp_comm_s, bubble_s, optimizer_s}.
Json breakdown_to_json(const TimeBreakdown& b);

}  // namespace mplan::sim
