// Sweep -> JSON; field names follow the plan file's (parallel.*) and simulate()'s result. Keys
// are always present (null where a value does not apply), so consumers need no guessing.
#include "sim/sweep/sweep_json.hpp"

#include <algorithm>

#include "sim/plan_sim/simulation_json.hpp"

namespace mplan::sweep {

Json evaluated_to_json(const Evaluated& e, int64_t global_batch_size, int64_t rank) {
  const Candidate& c = e.candidate;
  const Figures& f = e.figures;
  Json j;
  if (rank > 0) j["rank"] = rank;
  j["layout"] = {
      {"tp", c.tp},
      {"cp", c.cp},
      {"ep", c.ep},
      {"etp", c.etp},
      {"pp", c.pp},
      {"vpp", c.vpp},
      {"dp", c.dp},
      {"first_stage_layers", c.first_stage_layers > 0 ? Json(c.first_stage_layers) : Json(nullptr)},
      {"last_stage_layers", c.last_stage_layers > 0 ? Json(c.last_stage_layers) : Json(nullptr)}};
  j["micro_batch_size"] = c.micro_batch_size;
  j["num_microbatches"] = num_microbatches(c, global_batch_size);
  j["sequence_parallel"] = c.sequence_parallel;
  j["tp_comm_overlap"] = c.tp_comm_overlap;
  j["recompute"] = to_string(c.recompute);
  j["distributed_optimizer"] = c.distributed_optimizer;
  j["use_megatron_fsdp"] = c.use_megatron_fsdp;
  j["data_parallel_sharding_strategy"] =
      c.use_megatron_fsdp ? Json(to_string(c.fsdp_sharding)) : Json(nullptr);
  j["schedule"] = to_string(c.schedule);
  j["cp_comm_type"] = to_string(c.cp_comm_type);
  j["hierarchical_context_parallel_sizes"] =
      c.cp_a2a > 0 ? Json::array({c.cp_a2a, c.cp / c.cp_a2a}) : Json(nullptr);
  j["overlap_p2p_comm"] = c.overlap_p2p_comm;
  j["cpu_offloading_num_layers"] = c.offload_layers;
  j["offload_modules"] = offload_module_names(c.offload_modules);
  j["iteration_time_s"] = f.iteration_time_s;
  j["tokens_per_s"] = f.tokens_per_s;
  j["model_tflops_per_gpu"] = f.model_tflops_per_gpu;
  j["mfu"] = f.mfu;
  j["bubble_fraction"] = f.bubble_fraction;
  j["breakdown"] = sim::breakdown_to_json(f.breakdown);
  j["peak_bytes"] = f.peak_bytes;
  j["capacity_bytes"] = f.capacity_bytes;
  j["fits"] = f.fits;
  return j;
}

Json sweep_to_json(const SweepRequest& request, const SweepResult& result, int64_t top_k,
                   const std::string& best_plan_path) {
  Json j;
  j["schema_version"] = kSweepSchemaVersion;
  j["model"] = request.base.model.name;
  j["cluster"] = request.base.cluster.name;
  j["gpus"] = request.gpus;
  j["global_batch_size"] = request.global_batch_size;
  j["seq_length"] = request.base.model.seq_length;
  j["objective"] = to_string(request.objective);
  j["fixed"] = to_string(request.fixed);
  j["top_k"] = top_k;
  j["memory_headroom"] = request.memory_headroom;
  j["gpu_memory_bytes"] = result.gpu_memory_bytes;
  j["usable_memory_bytes"] = result.capacity_bytes;
  j["counts"] = {{"candidates", result.candidates},
                 {"invalid", result.invalid},
                 {"out_of_memory", result.out_of_memory},
                 {"out_of_memory_pruned", result.out_of_memory_pruned},
                 {"skipped", result.skipped},
                 {"simulated", result.simulated},
                 {"fits", result.fits}};
  j["invalid_by_rule"] = Json::array();
  for (const RuleCount& r : result.invalid_by_rule)
    j["invalid_by_rule"].push_back({{"rule", r.rule}, {"example", r.example}, {"count", r.count}});
  j["top"] = Json::array();
  const int64_t k = std::min<int64_t>(top_k, static_cast<int64_t>(result.ranking.size()));
  for (int64_t i = 0; i < k; ++i)
    j["top"].push_back(evaluated_to_json(result.evaluated[static_cast<size_t>(result.ranking[i])],
                                         request.global_batch_size, i + 1));
  j["best_plan"] =
      best_plan_path.empty() || result.ranking.empty() ? Json(nullptr) : Json(best_plan_path);
  j["wall_time_s"] = result.wall_time_s;
  j["threads"] = result.threads;
  return j;
}

}  // namespace mplan::sweep
