// Candidate -> ParallelConfig and its short label. The fields the sweep does not vary keep the
// plan file's defaults, so that parse(to_json(to_parallel(c))) == to_parallel(c).
#include "sim/sweep/candidate.hpp"

#include "src/batch/microbatch_calculator.hpp"
#include "src/common/error.hpp"

namespace mplan::sweep {

int64_t num_microbatches(const Candidate& c, int64_t global_batch_size) {
  return microbatches_if_valid(global_batch_size, c.micro_batch_size, c.dp).value_or(0);
}

ParallelConfig to_parallel(const Candidate& c, int64_t global_batch_size) {
  ParallelConfig p;
  p.tp = c.tp;
  p.cp = c.cp;
  p.ep = c.ep;
  p.etp = c.etp;
  p.pp = c.pp;
  p.vpp = c.vpp;
  p.dp = c.dp;
  p.sequence_parallel = c.sequence_parallel;
  p.micro_batch_size = c.micro_batch_size;
  p.global_batch_size = global_batch_size;
  p.schedule = c.schedule;
  p.recompute = c.recompute;
  p.recompute_method = RecomputeMethod::kUniform;
  p.recompute_num_layers = 1;
  p.tp_comm_overlap = c.tp_comm_overlap;
  p.distributed_optimizer = c.distributed_optimizer;
  p.use_megatron_fsdp = c.use_megatron_fsdp;
  if (c.use_megatron_fsdp) p.data_parallel_sharding_strategy = c.fsdp_sharding;
  if (c.first_stage_layers > 0) p.decoder_first_pipeline_num_layers = c.first_stage_layers;
  if (c.last_stage_layers > 0) p.decoder_last_pipeline_num_layers = c.last_stage_layers;
  p.cp_comm_type = c.cp_comm_type;
  if (c.cp_comm_type == CpCommType::kA2aP2p && c.cp_a2a > 0)
    p.hierarchical_context_parallel_sizes = {c.cp_a2a, c.cp / c.cp_a2a};
  p.overlap_p2p_comm = c.overlap_p2p_comm;
  return p;
}

void apply_candidate(const Candidate& c, int64_t global_batch_size, Plan& plan) {
  plan.parallel = to_parallel(c, global_batch_size);
  TrainingConfig& t = plan.training;
  t.cpu_offloading_num_layers = c.offload_layers;
  t.fine_grained_activation_offloading = c.offload_modules != 0;
  t.offload_modules = c.offload_modules;
}

std::string layout_label(const Candidate& c) {
  std::string s = cat("tp", c.tp);
  if (c.cp > 1) s += cat(" cp", c.cp);
  if (c.cp_comm_type == CpCommType::kA2aP2p)
    s += cat(" (a2a+p2p ", c.cp_a2a, "x", c.cp_a2a > 0 ? c.cp / c.cp_a2a : 0, ")");
  else if (c.cp_comm_type != CpCommType::kP2p)
    s += cat(" (", to_string(c.cp_comm_type), ")");
  if (c.ep > 1) s += cat(" ep", c.ep);
  if (c.etp != c.tp) s += cat(" etp", c.etp);
  s += cat(" pp", c.pp);
  if (c.vpp > 1) s += cat(" vpp", c.vpp);
  s += cat(" dp", c.dp);
  if (c.first_stage_layers > 0 || c.last_stage_layers > 0)
    s += cat(" (first ", c.first_stage_layers, ", last ", c.last_stage_layers, " layers)");
  return s;
}

std::string dp_sharding_label(const Candidate& c) {
  if (c.use_megatron_fsdp) return cat("fsdp ", to_string(c.fsdp_sharding));
  return c.distributed_optimizer ? "dist-opt" : "off";
}

std::string sp_label(const Candidate& c) {
  if (!c.sequence_parallel) return "off";
  return c.tp_comm_overlap ? "on+tp-overlap" : "on";
}

std::string offload_label(const Candidate& c) {
  if (c.offload_layers > 0)
    return cat(c.offload_layers, c.offload_layers == 1 ? " layer" : " layers");
  if (c.offload_modules == 0) return "-";
  std::string s;
  for (const std::string& m : offload_module_names(c.offload_modules))
    s += (s.empty() ? "" : "+") + m;
  return s;
}

}  // namespace mplan::sweep
