// Lowering: a plan and the schedule it runs become a des::Program — per engine rank (one per
// pipeline stage, or one per GPU with full_grid) the compute passes of its schedule actions, the
// pipeline transfers between them as send/recv rendezvous in blocking groups, the data-parallel
// gradient buckets on their own stream, the end-of-step collectives and the optimizer, and the
// memory each op allocates or frees. Per op it also keeps what the breakdown needs: the split of
// a compute-stream op's time by category and the transfers it waited on.
// Invariant: every op on the compute stream has a PassCost whose total is its duration; the
// program of each engine rank walks schedule.rank(stage) in order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/des/program.hpp"
#include "sim/plan_sim/chunk_costs.hpp"
#include "sim/plan_sim/layer_costs.hpp"
#include "sim/plan_sim/simulate.hpp"
#include "sim/plan_sim/stage_groups.hpp"
#include "src/parallel/rank_grid.hpp"
#include "src/plan/plan.hpp"
#include "src/schedule/schedule.hpp"

namespace mplan::sim {

// Streams of every engine rank.
enum LoweredStream : int32_t {
  kStreamCompute = 0,  // kernels and the tensor/context/expert-parallel collectives in line
  kStreamDp = 1,       // data-parallel gradient reduce and parameter all-gather (overlapped)
  kStreamSendFwd = 2,
  kStreamRecvFwd = 3,
  kStreamSendBwd = 4,
  kStreamRecvBwd = 5,
  kNumLoweredStreams = 6
};
// Lowered::p2p_kind: a transfer's stream as kStreamSendFwd .. kStreamRecvBwd + 1 - kStreamSendFwd.
enum : uint8_t { kP2pNone = 0, kP2pSendFwd, kP2pRecvFwd, kP2pSendBwd, kP2pRecvBwd };

// Memory classes.
enum LoweredMemClass : int {
  kMemWeights = 0,
  kMemGrads,
  kMemOptimizer,
  kMemActivations,
  kMemOther
};

struct OpMeta {
  int32_t cost = -1;      // index into Lowered::costs; -1: not on the compute stream
  int32_t dep_begin = 0;  // Lowered::deps[dep_begin, dep_end): transfers / DP ops it waited on
  int32_t dep_end = 0;
};

// Reused from plan to plan (one per thread): the program and everything built beside it.
struct Lowered {
  des::Program program;
  std::vector<OpMeta> meta;     // per OpId
  std::vector<PassCost> costs;  // per compute-stream op
  std::vector<des::OpId> deps;
  std::vector<int32_t> stage_of_rank;  // per engine rank: its pipeline stage
  std::vector<int32_t> rank_of_stage;  // per stage: the engine rank standing for it
  std::vector<int64_t> global_rank;    // per engine rank: its GPU (global rank)
  std::vector<StageGroups> groups;     // per stage
  PlanCosts plan_costs;                // the layer costs last built (stages share them)
  ChunkTable chunks;
  int64_t microbatches = 0;

  // Scratch.
  struct Channel {
    std::vector<des::RendezvousId> ids;
    int32_t sends = 0, recvs = 0;
  };
  std::vector<Channel> channels;  // per (engine rank, direction slot): p2p rendezvous in order
  std::vector<std::vector<std::vector<des::RendezvousId>>> collectives;  // per slot, group
  std::vector<int32_t> collective_counts;                                // per (engine rank, slot)
  std::vector<int32_t> sync_group;  // full grid: per rank, its synchronous group index
  std::vector<int32_t> sync_group_size;
  std::vector<int64_t> scratch;
  std::vector<des::OpId> group_ops, prev_group, pending, ag_ops;
  // overlap_p2p_comm: per OpId, the p2p transfer's kind (kP2pNone for other ops), and the pending
  // transfers a compute pass left for a later one.
  std::vector<uint8_t> p2p_kind;
  std::vector<des::OpId> kept;
  std::vector<int32_t> piece_ends;
  std::vector<int32_t> first_fwd, last_bwd, last_w;  // per chunk: action index
};

// Megatron-FSDP's collectives over one chunk's parameters on a stage with groups `g`, as the
// lowering issues them on the data-parallel stream (both price through one chunk collective): an
// all-gather of the parameters (dense over dp·cp, experts over expert dp) before each forward and
// backward pass when they are sharded, a reduce-scatter of the gradients after each backward when
// those are. 0 for what is not sharded, both 0 without FSDP.
struct FsdpCollectives {
  int64_t gather_ns = 0;
  int64_t reduce_ns = 0;
};
FsdpCollectives fsdp_collectives(const Plan& plan, const StageGroups& g, const ChunkCosts& ch);

// Builds the program of `plan` walking `schedule` (checked against the plan by the caller).
// Throws mplan::Error "schedule: ..." when a send or receive has no partner.
void lower(const Plan& plan, const Schedule& schedule, const RankGrid& grid,
           const SimOptions& options, Lowered& out);

}  // namespace mplan::sim
