// StageGroups: where the communication groups of one pipeline stage lie on the cluster — the
// tensor-, context-, data-, expert-parallel groups of the stage's first rank (tp = cp = dp = 0),
// its pipeline neighbours, the embedding pair and the model-parallel group — as the collective
// cost model needs them (sim/cost/collective_cost: GPUs, nodes, GPUs per node).
// Invariant: members come from RankGrid's coordinates, so they equal RankGrid's groups; nothing is
// allocated once the caller's scratch vector has grown.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/cost/collective_cost.hpp"
#include "src/parallel/rank_grid.hpp"

namespace mplan::sim {

struct StageGroups {
  int64_t stage = 0;
  int64_t rank = 0;                // global rank of the stage's representative (tp = cp = dp = 0)
  cost::GroupPlacement tp;         // tensor parallel (kTp)
  cost::GroupPlacement cp;         // context parallel (kCp)
  cost::GroupPlacement dp_cp;      // gradient reduction of dense parameters (kDpCp)
  cost::GroupPlacement ep;         // expert parallel all-to-all (kEp)
  cost::GroupPlacement expert_tp;  // expert tensor parallel (kExpertTp)
  cost::GroupPlacement expert_dp;  // gradient reduction of expert parameters (kExpertDp)
  cost::GroupPlacement model_parallel;  // tp x pp (kTpPp): gradient-norm all-reduce
  cost::GroupPlacement world;           // every GPU (gradient norm with the distributed optimizer)
  bool cp_ring_same_node = true;        // every context-parallel neighbour pair shares a node
  // --cp-comm-type a2a / a2a+p2p: the all-to-all group (context-parallel ranks 0 .. a - 1 of the
  // stage's first rank; all of them for a2a), and whether every neighbour pair of the p2p ring
  // between those groups (context-parallel ranks i and i + a) shares a node.
  cost::GroupPlacement cp_a2a;
  bool cp_outer_ring_same_node = true;
  bool next_same_node = true;       // this rank and its counterpart on stage (stage + 1) % pp
  bool prev_same_node = true;       // ... on stage (stage - 1 + pp) % pp
  bool embedding_same_node = true;  // the first- and last-stage ranks of its embedding group
};

// Groups of pipeline stage `stage`, with a context-parallel all-to-all group of `cp_a2a` ranks
// (cp_a2a_size of the plan; 1: none). `scratch` is reused between calls.
StageGroups stage_groups(const RankGrid& grid, int64_t gpus_per_node, int64_t stage,
                         std::vector<int64_t>& scratch, int64_t cp_a2a);

// Placement of the ranks in `ranks` (reordered in place): nodes spanned and GPUs per node, the
// most and (when they differ) the fewest on one node — groups of a GPU count that is no multiple
// of the node size straddle nodes unevenly (dp 3 of tp 4 on 8-GPU nodes).
cost::GroupPlacement placement_of_ranks(std::vector<int64_t>& ranks, int64_t gpus_per_node);

}  // namespace mplan::sim
