// Stage groups: each placement equals the placement of the matching RankGrid group (Megatron's
// groups) of the stage's first rank; pipeline neighbours and the embedding pair on nodes.
#include "sim/plan_sim/stage_groups.hpp"

#include <gtest/gtest.h>

#include "src/common/error.hpp"

namespace mplan::sim {
namespace {

cost::GroupPlacement of(const RankGrid& g, GroupKind k, int rank, int64_t gpn) {
  std::vector<int64_t> r;
  for (int m : g.group_of(k, rank)) r.push_back(m);
  return placement_of_ranks(r, gpn);
}

void expect_same(const cost::GroupPlacement& a, const cost::GroupPlacement& b, const char* what) {
  EXPECT_EQ(a.size, b.size) << what;
  EXPECT_EQ(a.nodes, b.nodes) << what;
  EXPECT_EQ(a.per_node, b.per_node) << what;
  EXPECT_EQ(a.min_per_node, b.min_per_node) << what;
}

TEST(StageGroups, MatchRankGridGroups) {
  struct Case {
    int64_t tp, cp, pp, dp, ep, etp, gpn;
    const char* order;
  };
  for (const Case& k :
       {Case{2, 2, 2, 2, 1, 2, 8, "tp-cp-ep-dp-pp"}, Case{2, 1, 4, 4, 2, 1, 8, "tp-cp-ep-dp-pp"},
        Case{4, 1, 2, 2, 1, 4, 4, "tp-cp-ep-pp-dp"}, Case{1, 2, 2, 4, 4, 1, 2, "tp-cp-ep-dp-pp"},
        // Uneven: dp 3 of tp 4 on 8-GPU nodes (gpt3-175b tp 4 pp 8 dp 3 on dgx-h100).
        Case{4, 1, 8, 3, 1, 4, 8, "tp-cp-ep-dp-pp"}, Case{2, 1, 2, 3, 1, 2, 4, "tp-cp-ep-pp-dp"}}) {
    ParallelConfig p;
    p.tp = k.tp, p.cp = k.cp, p.pp = k.pp, p.dp = k.dp, p.ep = k.ep, p.etp = k.etp;
    p.order = k.order;
    const RankGrid g(p);
    std::vector<int64_t> scratch;
    for (int64_t st = 0; st < k.pp; ++st) {
      const StageGroups s = stage_groups(g, k.gpn, st, scratch, 1);
      const int r = g.rank_at(0, 0, 0, static_cast<int>(st));
      EXPECT_EQ(s.rank, r);
      expect_same(s.tp, of(g, GroupKind::kTp, r, k.gpn), "tp");
      expect_same(s.cp, of(g, GroupKind::kCp, r, k.gpn), "cp");
      expect_same(s.dp_cp, of(g, GroupKind::kDpCp, r, k.gpn), "dp-cp");
      expect_same(s.ep, of(g, GroupKind::kEp, r, k.gpn), "ep");
      expect_same(s.expert_tp, of(g, GroupKind::kExpertTp, r, k.gpn), "expert-tp");
      expect_same(s.expert_dp, of(g, GroupKind::kExpertDp, r, k.gpn), "expert-dp");
      expect_same(s.model_parallel, of(g, GroupKind::kTpPp, r, k.gpn), "tp-pp");
      const std::vector<int> pp = g.group_of(GroupKind::kPp, r);
      const int next = pp[(st + 1) % k.pp];
      EXPECT_EQ(s.next_same_node, r / k.gpn == next / k.gpn);
      EXPECT_EQ(s.world.size, g.world_size());
    }
  }
}

TEST(StageGroups, PipelineAcrossNodes) {
  ParallelConfig p;
  p.tp = 4, p.pp = 4, p.dp = 1;
  const RankGrid g(p);
  std::vector<int64_t> scratch;
  // 8 GPUs per node: stages 0-1 on node 0, 2-3 on node 1.
  EXPECT_TRUE(stage_groups(g, 8, 0, scratch, 1).next_same_node);
  EXPECT_FALSE(stage_groups(g, 8, 1, scratch, 1).next_same_node);
  EXPECT_FALSE(stage_groups(g, 8, 0, scratch, 1).embedding_same_node);
  EXPECT_FALSE(stage_groups(g, 8, 0, scratch, 1).prev_same_node);  // stage 3 is on node 1
  const StageGroups s = stage_groups(g, 8, 0, scratch, 1);
  EXPECT_EQ(s.model_parallel.nodes, 2);
  EXPECT_EQ(s.model_parallel.per_node, 8);
}

TEST(StageGroups, PlacementOfRanks) {
  std::vector<int64_t> r{0, 1, 8, 9};
  const cost::GroupPlacement g = placement_of_ranks(r, 8);
  EXPECT_EQ(g.size, 4);
  EXPECT_EQ(g.nodes, 2);
  EXPECT_EQ(g.per_node, 2);
  EXPECT_TRUE(g.even());
  std::vector<int64_t> across{0, 8, 16, 24};
  EXPECT_EQ(placement_of_ranks(across, 8), (cost::GroupPlacement{4, 4, 1, 0}));
  std::vector<int64_t> one_node{3, 1, 2, 0};
  EXPECT_EQ(placement_of_ranks(one_node, 8), (cost::GroupPlacement{4, 1, 4, 0}));
}

TEST(StageGroups, UnevenPlacementKeepsTheMostAndTheFewest) {
  std::vector<int64_t> uneven{0, 1, 8};
  EXPECT_EQ(placement_of_ranks(uneven, 8), (cost::GroupPlacement{3, 2, 2, 1}));
  // tp 4 · pp 8 · dp 3 on 8-GPU nodes: the data-parallel group of rank 0 is {0, 4, 8} (nodes 0,
  // 0, 1) — 2 on one node, 1 on the other.
  ParallelConfig p;
  p.tp = 4, p.pp = 8, p.dp = 3, p.etp = 4;
  const RankGrid grid(p);
  std::vector<int64_t> scratch;
  const StageGroups s = stage_groups(grid, 8, 0, scratch, 1);
  EXPECT_EQ(s.dp_cp, (cost::GroupPlacement{3, 2, 2, 1}));
  EXPECT_EQ(s.tp, (cost::GroupPlacement{4, 1, 4, 0}));
}

}  // namespace
TEST(StageGroups, HierarchicalContextParallelGroups) {
  // cp 8 as [4, 2] on 4-GPU nodes with tp 1: the all-to-all group is context-parallel ranks
  // 0..3 (one node); the ring between groups joins ranks i and i + 4, on different nodes.
  ParallelConfig p;
  p.cp = 8;
  p.cp_comm_type = CpCommType::kA2aP2p;
  p.hierarchical_context_parallel_sizes = {4, 2};
  const RankGrid g(p);
  std::vector<int64_t> scratch;
  const StageGroups s = stage_groups(g, 4, 0, scratch, cp_a2a_size(p));
  EXPECT_EQ(cp_a2a_size(p), 4);
  EXPECT_EQ(s.cp_a2a.size, 4);
  EXPECT_EQ(s.cp_a2a.nodes, 1);
  EXPECT_EQ(s.cp.nodes, 2);
  EXPECT_FALSE(s.cp_outer_ring_same_node);
  EXPECT_FALSE(s.cp_ring_same_node);
  // On 8-GPU nodes everything shares one node.
  const StageGroups t = stage_groups(g, 8, 0, scratch, cp_a2a_size(p));
  EXPECT_TRUE(t.cp_outer_ring_same_node);
  // No all-to-all: a group of one.
  EXPECT_EQ(stage_groups(g, 8, 0, scratch, 1).cp_a2a.size, 1);
}

}  // namespace mplan::sim
