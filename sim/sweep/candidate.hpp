// Candidate: one point of the sweep's search space, a compact value: the parallel layout, the
// pipeline split, the micro-batch, the switches, the context-parallel exchange and activation
// offloading. to_parallel() turns it into the plan's ParallelConfig and apply_candidate() into a
// whole plan (the defaults of a plan file for every knob the sweep does not vary), so that a
// candidate and the plan file written for it are the same plan.
#pragma once

#include <cstdint>
#include <string>

#include "src/parallel/parallel_config.hpp"
#include "src/plan/plan.hpp"

namespace mplan::sweep {

struct Candidate {
  int32_t tp = 1, cp = 1, ep = 1, etp = 1, pp = 1, vpp = 1, dp = 1;
  int32_t micro_batch_size = 1;
  // Uneven pipeline split (Megatron's decoder_first/last_pipeline_num_layers); 0 = even split.
  int32_t first_stage_layers = 0;
  int32_t last_stage_layers = 0;
  ScheduleKind schedule = ScheduleKind::k1F1B;
  Recompute recompute = Recompute::kNone;
  bool sequence_parallel = false;
  // tp_comm_overlap: Transformer Engine's userbuffers overlap sequence parallelism's all-gathers
  // and reduce-scatters with the GEMMs beside them.
  bool tp_comm_overlap = false;
  bool distributed_optimizer = false;
  // Megatron-FSDP (use_megatron_fsdp; distributed_optimizer is then true, as Megatron-FSDP v1
  // needs) and its data_parallel_sharding_strategy.
  bool use_megatron_fsdp = false;
  DpSharding fsdp_sharding = DpSharding::kOptimGradsParams;
  // --cp-comm-type (p2p unless cp > 1) and, for a2a+p2p, the all-to-all group size: the plan's
  // hierarchical_context_parallel_sizes are [cp_a2a, cp / cp_a2a] (0 for the other types).
  CpCommType cp_comm_type = CpCommType::kP2p;
  int32_t cp_a2a = 0;
  // overlap_p2p_comm: read only with the interleaved schedule (false for the others).
  bool overlap_p2p_comm = false;
  // Activation offloading: training.cpu_offloading_num_layers, and fine-grained offloading of
  // these OffloadModule bits (training.offload_modules) when non-zero.
  int32_t offload_layers = 0;
  uint32_t offload_modules = 0;
  bool operator==(const Candidate&) const = default;
};

// The plan's parallel section for `c` with global batch `global_batch_size`. Full recompute is
// Megatron's uniform method with one layer per checkpoint; etp as given; everything else at the
// plan file's defaults (order tp-cp-ep-dp-pp, overlapped grad reduce and param gather).
ParallelConfig to_parallel(const Candidate& c, int64_t global_batch_size);

// Sets `plan`'s parallel section (to_parallel) and its activation-offloading fields to `c`'s; the
// rest of the plan (model, cluster, other training fields) is left as it is.
void apply_candidate(const Candidate& c, int64_t global_batch_size, Plan& plan);

// Micro-batches per iteration of a candidate (src/batch's count: global batch / (micro-batch x
// dp)); 0 when the global batch does not divide into them.
int64_t num_microbatches(const Candidate& c, int64_t global_batch_size);

// Short layout label for tables: "tp8 pp16 dp1", with cp (and its exchange when not p2p), ep,
// etp, vpp and the uneven split only when they matter ("tp4 cp2 pp8 vpp3 dp4",
// "tp8 cp4 (a2a+p2p 2x2) pp4 dp2", "pp16 (first 7, last 7 layers)").
std::string layout_label(const Candidate& c);

// Data-parallel sharding for tables: "off" (every rank keeps the whole model state), "dist-opt"
// (the distributed optimizer), "fsdp optim_grads" (Megatron-FSDP with that strategy).
std::string dp_sharding_label(const Candidate& c);

// Sequence parallelism for tables: "off", "on", "on+tp-overlap" (with tp_comm_overlap).
std::string sp_label(const Candidate& c);

// Activation offloading for tables: "-" (none), "3 layers" (cpu_offloading_num_layers) or the
// fine-grained modules joined by '+' ("core_attn+attn_proj").
std::string offload_label(const Candidate& c);

}  // namespace mplan::sweep
