// SimulationResult -> JSON, field for field (names as in simulate.hpp).
#include "sim/plan_sim/simulation_json.hpp"

namespace mplan::sim {

Json breakdown_to_json(const TimeBreakdown& b) {
  return {{"compute_s", b.compute_s}, {"tp_comm_s", b.tp_comm_s},    {"cp_comm_s", b.cp_comm_s},
          {"ep_comm_s", b.ep_comm_s}, {"pp_comm_s", b.pp_comm_s},    {"dp_comm_s", b.dp_comm_s},
          {"bubble_s", b.bubble_s},   {"optimizer_s", b.optimizer_s}};
}

Json simulation_to_json(const SimulationResult& r) {
  Json j;
  j["schema_version"] = kSimulationSchemaVersion;
  j["iteration_time_s"] = r.iteration_time_s;
  j["tokens_per_s"] = r.tokens_per_s;
  j["model_tflops_per_gpu"] = r.model_tflops_per_gpu;
  j["mfu"] = r.mfu;
  j["flops_formula"] = r.flops_formula;
  j["model_flops_per_iteration"] = r.model_flops_per_iteration;
  j["bubble_fraction"] = r.bubble_fraction;
  j["num_microbatches"] = r.num_microbatches;
  j["critical_stage"] = r.critical_stage;
  j["breakdown"] = breakdown_to_json(r.breakdown);
  Json stages = Json::array();
  for (const StageMemory& s : r.per_stage)
    stages.push_back({{"pp_rank", s.pp_rank},
                      {"peak_bytes", s.peak_bytes},
                      {"weights_bytes", s.weights_bytes},
                      {"grads_bytes", s.grads_bytes},
                      {"optimizer_bytes", s.optimizer_bytes},
                      {"activations_bytes", s.activations_bytes},
                      {"other_bytes", s.other_bytes}});
  j["memory"] = {{"per_stage", std::move(stages)},
                 {"peak_bytes", r.peak_bytes},
                 {"capacity_bytes", r.capacity_bytes},
                 {"fits", r.fits},
                 {"runtime_overhead_bytes", r.runtime_overhead_bytes}};
  j["simulation"] = {{"engine_ranks", r.num_engine_ranks}, {"ops", r.num_ops}};
  return j;
}

}  // namespace mplan::sim
