// RankGrid: Megatron-LM's rank layout (RankGenerator + initialize_model_parallel) for one parallel
// config: rank <-> coordinates, every communication group kind Megatron builds, node placement.
// Invariant: groups and their member order equal Megatron's get_ranks() for both the decoder grid
// (tp, cp, dp, pp) and the expert grid (etp, ep, expert dp, pp). O(1) state; groups on demand.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "src/parallel/parallel_config.hpp"

namespace mplan {

// The group kinds of initialize_model_parallel, named after the axes they span.
enum class GroupKind : uint8_t {
  kTp,                 // _TENSOR_MODEL_PARALLEL_GROUP
  kPp,                 // _PIPELINE_MODEL_PARALLEL_GROUP
  kDp,                 // _DATA_PARALLEL_GROUP
  kCp,                 // _CONTEXT_PARALLEL_GROUP
  kDpCp,               // _DATA_PARALLEL_GROUP_WITH_CP (gradient reduction)
  kTpPp,               // _MODEL_PARALLEL_GROUP
  kTpCp,               // _TENSOR_AND_CONTEXT_PARALLEL_GROUP
  kTpDp,               // _TENSOR_AND_DATA_PARALLEL_GROUP
  kTpDpCp,             // _TENSOR_AND_DATA_PARALLEL_GROUP_WITH_CP
  kEmbedding,          // _EMBEDDING_GROUP: first and last stage of each pp group (first if pp 1)
  kPositionEmbedding,  // _POSITION_EMBEDDING_GROUP: first stage of each pp group
  kEp,                 // _EXPERT_MODEL_PARALLEL_GROUP (expert grid)
  kExpertTp,           // _EXPERT_TENSOR_PARALLEL_GROUP (expert grid 'tp', size etp)
  kExpertDp,           // _EXPERT_DATA_PARALLEL_GROUP (expert grid 'dp')
  kTpEp,               // _EXPERT_TENSOR_AND_MODEL_PARALLEL_GROUP (expert grid 'tp-ep')
  kTpEpPp,             // _EXPERT_TENSOR_MODEL_PIPELINE_PARALLEL_GROUP (expert grid 'tp-ep-pp')
};
inline constexpr int kNumGroupKinds = 16;

// All kinds in the order above (the order show-groups prints them).
const std::array<GroupKind, kNumGroupKinds>& all_group_kinds();
const char* to_string(GroupKind k);  // "tp", "dp-cp", "position-embedding", "expert-tp", ...
std::optional<GroupKind> group_kind_from_string(std::string_view name);
// True for the kinds every rank belongs to exactly once (all but embedding, position-embedding).
bool group_kind_covers_world(GroupKind k);

// A rank's coordinates: decoder grid (tp, cp, dp, pp) and expert grid (expert_tp, ep, expert_dp;
// its pp equals the decoder's, which Megatron asserts).
struct RankCoord {
  int tp = 0, cp = 0, dp = 0, pp = 0;
  int ep = 0, expert_tp = 0, expert_dp = 0;
  bool operator==(const RankCoord&) const = default;
};

// Where a rank runs: rank r is GPU r % gpus_per_node of node r / gpus_per_node.
struct RankPlacement {
  int node = 0;
  int local_gpu = 0;
  bool operator==(const RankPlacement&) const = default;
};

// Per rank: group kind name -> member world ranks (the type of exec::GroupMembers).
using RankGroupMap = std::map<std::string, std::vector<int>>;

// A reason Megatron refuses a layout, with the plan field it concerns ("parallel.order").
struct RankGridProblem {
  std::string field;
  std::string message;
};

// Every reason Megatron would refuse (tp, cp, ep, etp, pp, dp, order) of `p`; empty when fine.
std::vector<RankGridProblem> rank_grid_problems(const ParallelConfig& p);
// Megatron's data_parallel_size = world / (tp·pp·cp); throws Error "<field>: ..." when it does
// not divide (e.g. field "--gpus").
int64_t data_parallel_size_for_world(int64_t world_size, const ParallelConfig& p,
                                     const std::string& field);

class RankGrid {
 public:
  // Throws mplan::Error "<field>: <reason>" with the first of rank_grid_problems(p).
  explicit RankGrid(const ParallelConfig& p);

  int world_size() const { return world_; }
  // The order Megatron uses: lower case, axes it was not given appended (tp, pp, dp, ep, cp).
  const std::string& order() const { return order_; }
  int tp() const { return dec_.size[kTpAxis]; }
  int cp() const { return dec_.size[kCpAxis]; }
  int dp() const { return dec_.size[kDpAxis]; }
  int pp() const { return dec_.size[kPpAxis]; }
  int ep() const { return exp_.size[kEpAxis]; }
  int expert_tp() const { return exp_.size[kTpAxis]; }
  int expert_dp() const { return exp_.size[kDpAxis]; }

  RankCoord coord(int rank) const;
  int rank_at(int tp, int cp, int dp, int pp) const;                       // decoder grid
  int expert_rank_at(int expert_tp, int ep, int expert_dp, int pp) const;  // expert grid
  static RankPlacement placement(int rank, int gpus_per_node);

  // Groups of one kind, in Megatron's creation order; members in Megatron's order.
  int num_groups(GroupKind k) const;
  int group_size(GroupKind k) const;
  std::vector<int> group_members(GroupKind k, int group_index) const;
  std::vector<std::vector<int>> groups(GroupKind k) const;
  // The group of kind k holding `rank`: its index, or -1 when the rank is in none (a middle
  // pipeline stage has no embedding group); members empty then.
  int group_index_of(GroupKind k, int rank) const;
  std::vector<int> group_of(GroupKind k, int rank) const;
  // Every group `rank` belongs to, by kind name (kinds it is in no group of are absent).
  RankGroupMap groups_of_rank(int rank) const;

 private:
  enum Axis : int { kTpAxis = 0, kCpAxis, kEpAxis, kDpAxis, kPpAxis, kNumAxes };
  struct Grid {  // one RankGenerator: sizes and strides per axis
    std::array<int, kNumAxes> size{};
    std::array<int64_t, kNumAxes> stride{};
  };
  const Grid& grid_of(GroupKind k) const;
  static unsigned mask_of(GroupKind k);

  int world_ = 1;
  std::string order_;
  std::array<Axis, kNumAxes> axis_at_{};  // axis at each order position, fastest first
  Grid dec_, exp_;
};

// Nodes a set of ranks spans, and whether it crosses a node boundary.
int nodes_spanned(const std::vector<int>& ranks, int gpus_per_node);
inline bool crosses_nodes(const std::vector<int>& ranks, int gpus_per_node) {
  return nodes_spanned(ranks, gpus_per_node) > 1;
}

}  // namespace mplan
