// CSV writer: plain comma-separated values, no quoting needed (no field holds a comma); every
// row has as many fields as the header.
#include "sim/sweep/sweep_csv.hpp"

#include <cstdio>
#include <vector>

#include "sim/sweep/sweep_json.hpp"
#include "src/common/error.hpp"

namespace mplan::sweep {

namespace {
std::string g9(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}
}  // namespace

std::string sweep_csv(const SweepRequest& request, const SweepResult& result) {
  std::string out =
      "schema_version,index,rank,tp,cp,ep,etp,pp,vpp,dp,first_stage_layers,last_stage_layers,"
      "micro_batch_size,num_microbatches,sequence_parallel,tp_comm_overlap,recompute,"
      "distributed_optimizer,use_megatron_fsdp,data_parallel_sharding_strategy,"
      "schedule,cp_comm_type,cp_a2a,overlap_p2p_comm,cpu_offloading_num_layers,offload_modules,"
      "iteration_time_s,tokens_per_s,model_tflops_per_gpu,mfu,bubble_fraction,"
      "compute_s,tp_comm_s,cp_comm_s,ep_comm_s,pp_comm_s,dp_comm_s,bubble_s,optimizer_s,"
      "peak_bytes,capacity_bytes,fits\n";
  std::vector<int64_t> rank_of(result.evaluated.size(), 0);
  for (size_t r = 0; r < result.ranking.size(); ++r)
    rank_of[static_cast<size_t>(result.ranking[r])] = static_cast<int64_t>(r) + 1;
  for (size_t i = 0; i < result.evaluated.size(); ++i) {
    const Evaluated& e = result.evaluated[i];
    const Candidate& c = e.candidate;
    const Figures& f = e.figures;
    const sim::TimeBreakdown& b = f.breakdown;
    out += cat(kSweepSchemaVersion, ",", e.index, ",",
               rank_of[i] > 0 ? std::to_string(rank_of[i]) : std::string(), ",", c.tp, ",", c.cp,
               ",", c.ep, ",", c.etp, ",", c.pp, ",", c.vpp, ",", c.dp, ",", c.first_stage_layers,
               ",", c.last_stage_layers, ",", c.micro_batch_size, ",",
               num_microbatches(c, request.global_batch_size), ",", c.sequence_parallel ? 1 : 0,
               ",", c.tp_comm_overlap ? 1 : 0, ",", to_string(c.recompute), ",",
               c.distributed_optimizer ? 1 : 0, ",", c.use_megatron_fsdp ? 1 : 0, ",",
               c.use_megatron_fsdp ? to_string(c.fsdp_sharding) : "", ",", to_string(c.schedule),
               ",", to_string(c.cp_comm_type), ",", c.cp_a2a, ",", c.overlap_p2p_comm ? 1 : 0, ",",
               c.offload_layers, ",", c.offload_modules ? offload_label(c) : std::string(), ",",
               g9(f.iteration_time_s), ",", g9(f.tokens_per_s), ",", g9(f.model_tflops_per_gpu),
               ",", g9(f.mfu), ",", g9(f.bubble_fraction), ",", g9(b.compute_s), ",",
               g9(b.tp_comm_s), ",", g9(b.cp_comm_s), ",", g9(b.ep_comm_s), ",", g9(b.pp_comm_s),
               ",", g9(b.dp_comm_s), ",", g9(b.bubble_s), ",", g9(b.optimizer_s), ",", f.peak_bytes,
               ",", f.capacity_bytes, ",", f.fits ? 1 : 0, "\n");
  }
  return out;
}

}  // namespace mplan::sweep
