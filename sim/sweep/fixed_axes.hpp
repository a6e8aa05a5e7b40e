// FixedAxes: the values `mplan sweep --fix tp=8,pp=16,...` pins, one optional per axis of the
// sweep. Parsing names the flag and the offending item; each axis may be given once. A pinned
// value may lie outside the default search space (e.g. tp 16 across nodes); validate() still
// judges every candidate.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "src/parallel/parallel_config.hpp"
#include "src/plan/training_config.hpp"

namespace mplan::sweep {

struct FixedAxes {
  std::optional<int64_t> tp, cp, ep, etp, pp, vpp, dp;
  std::optional<int64_t> micro_batch_size;    // key "mbs" (or "micro_batch_size")
  std::optional<bool> sequence_parallel;      // key "sp": on/off
  std::optional<Recompute> recompute;         // none / selective / full
  std::optional<bool> distributed_optimizer;  // key "dist_opt": on/off
  std::optional<ScheduleKind> schedule;       // gpipe / 1f1b / interleaved / zb-h1
  // Context parallelism's exchange (cp > 1 layouts only: cp 1 has none): p2p / all_gather / a2a /
  // a2a+p2p; "cp_a2a": the all-to-all group size of a2a+p2p (implies a2a+p2p).
  std::optional<CpCommType> cp_comm_type;
  std::optional<int64_t> cp_a2a;
  std::optional<bool> overlap_p2p;  // key "overlap_p2p": on/off (interleaved schedule only)
  // Key "tp_comm_overlap": on/off (Transformer Engine's userbuffers; sequence parallel only).
  std::optional<bool> tp_comm_overlap;
  // Key "fsdp": off, or Megatron-FSDP with that data_parallel_sharding_strategy (no_shard, optim,
  // optim_grads, optim_grads_params); nullopt inside: off. FSDP implies the distributed optimizer.
  std::optional<std::optional<DpSharding>> fsdp;
  // Activation offloading: "offload_layers" (cpu_offloading_num_layers; 0 = none) and
  // "offload_modules" (fine-grained; OffloadModule bits, 0 = none; names joined by '+').
  std::optional<int64_t> offload_layers;
  std::optional<uint32_t> offload_modules;
  bool operator==(const FixedAxes&) const = default;
  bool empty() const { return *this == FixedAxes{}; }
};

// Parses "key=value[,key=value...]" (spaces around items ignored; "" gives no fixes). Keys: tp,
// cp, ep, etp, pp, vpp, dp, mbs, sp, tp_comm_overlap, recompute, dist_opt, fsdp, schedule,
// cp_comm_type, cp_a2a, overlap_p2p, offload_layers, offload_modules (e.g. core_attn+attn_proj, or
// none). Throws Error naming `flag` and the item, also for fixes that contradict each other
// (fsdp with dist_opt=off, tp_comm_overlap=on with sp=off).
FixedAxes parse_fixed_axes(const std::string& text, const std::string& flag = "--fix");

// The same, written back in the canonical key order ("tp=8,pp=16"); "" when nothing is fixed.
// parse_fixed_axes(to_string(f)) == f.
std::string to_string(const FixedAxes& f);

}  // namespace mplan::sweep
