// Group placement from RankGrid coordinates: members of each group are enumerated by varying the
// group's axes with the other coordinates fixed, then counted per node (the most and the fewest
// on one node: groups may straddle nodes unevenly).
#include "sim/plan_sim/stage_groups.hpp"

#include <algorithm>

#include "src/common/error.hpp"

namespace mplan::sim {

cost::GroupPlacement placement_of_ranks(std::vector<int64_t>& ranks, int64_t gpus_per_node) {
  MPLAN_CHECK(!ranks.empty() && gpus_per_node >= 1, "group of ", ranks.size(), " ranks, ",
              gpus_per_node, " GPUs per node");
  for (int64_t& r : ranks) r /= gpus_per_node;  // node of each member
  // Members come along a grid axis, so their nodes are usually in order already: groups of
  // 10^5 members (data parallel on 10^6 GPUs) are then counted without sorting.
  if (!std::is_sorted(ranks.begin(), ranks.end())) std::sort(ranks.begin(), ranks.end());
  cost::GroupPlacement g;
  g.size = static_cast<int64_t>(ranks.size());
  g.nodes = 0;
  int64_t run_min = INT64_MAX, run_max = 0;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j < ranks.size() && ranks[j] == ranks[i]) ++j;
    ++g.nodes;
    run_min = std::min<int64_t>(run_min, static_cast<int64_t>(j - i));
    run_max = std::max<int64_t>(run_max, static_cast<int64_t>(j - i));
    i = j;
  }
  g.per_node = run_max;
  g.min_per_node = run_min == run_max ? 0 : run_min;
  return g;
}

StageGroups stage_groups(const RankGrid& grid, int64_t gpus_per_node, int64_t stage,
                         std::vector<int64_t>& scratch, int64_t cp_a2a) {
  MPLAN_CHECK(stage >= 0 && stage < grid.pp(), "stage ", stage, " of ", grid.pp());
  const int pp = grid.pp(), st = static_cast<int>(stage);
  StageGroups g;
  g.stage = stage;
  g.rank = grid.rank_at(0, 0, 0, st);
  const RankCoord c = grid.coord(static_cast<int>(g.rank));
  auto node = [&](int64_t r) { return r / gpus_per_node; };
  auto place = [&](auto&& fill) {
    scratch.clear();
    fill();
    return placement_of_ranks(scratch, gpus_per_node);
  };
  g.tp = place([&] {
    for (int i = 0; i < grid.tp(); ++i) scratch.push_back(grid.rank_at(i, c.cp, c.dp, st));
  });
  g.cp = place([&] {
    for (int i = 0; i < grid.cp(); ++i) scratch.push_back(grid.rank_at(c.tp, i, c.dp, st));
  });
  g.dp_cp = place([&] {
    for (int i = 0; i < grid.dp(); ++i)
      for (int j = 0; j < grid.cp(); ++j) scratch.push_back(grid.rank_at(c.tp, j, i, st));
  });
  g.ep = place([&] {
    for (int i = 0; i < grid.ep(); ++i)
      scratch.push_back(grid.expert_rank_at(c.expert_tp, i, c.expert_dp, st));
  });
  g.expert_tp = place([&] {
    for (int i = 0; i < grid.expert_tp(); ++i)
      scratch.push_back(grid.expert_rank_at(i, c.ep, c.expert_dp, st));
  });
  g.expert_dp = place([&] {
    for (int i = 0; i < grid.expert_dp(); ++i)
      scratch.push_back(grid.expert_rank_at(c.expert_tp, c.ep, i, st));
  });
  g.model_parallel = place([&] {
    for (int p = 0; p < pp; ++p)
      for (int i = 0; i < grid.tp(); ++i) scratch.push_back(grid.rank_at(i, c.cp, c.dp, p));
  });
  // Ranks 0 .. world-1 fill whole nodes (validate's rule), or part of one.
  const int64_t world = grid.world_size();
  g.world.size = world;
  g.world.per_node = std::min(world, gpus_per_node);
  g.world.nodes = world / g.world.per_node;
  MPLAN_CHECK(g.world.nodes * g.world.per_node == world, "world ", world,
              " is not a whole number of nodes of ", gpus_per_node);
  for (int i = 0; i < grid.cp() && g.cp_ring_same_node; ++i) {
    const int64_t a = grid.rank_at(c.tp, i, c.dp, st);
    const int64_t b = grid.rank_at(c.tp, (i + 1) % grid.cp(), c.dp, st);
    g.cp_ring_same_node = node(a) == node(b);
  }
  // Megatron's hierarchical context-parallel groups (parallel_state.py): the first size groups
  // consecutive context-parallel ranks.
  const int a2a = static_cast<int>(std::clamp<int64_t>(cp_a2a, 1, grid.cp()));
  g.cp_a2a = place([&] {
    for (int i = 0; i < a2a; ++i) scratch.push_back(grid.rank_at(c.tp, i, c.dp, st));
  });
  for (int i = 0; a2a > 1 && i < grid.cp() && g.cp_outer_ring_same_node; i += a2a) {
    const int64_t a = grid.rank_at(c.tp, i, c.dp, st);
    const int64_t b = grid.rank_at(c.tp, (i + a2a) % grid.cp(), c.dp, st);
    g.cp_outer_ring_same_node = node(a) == node(b);
  }
  g.next_same_node = node(g.rank) == node(grid.rank_at(c.tp, c.cp, c.dp, (st + 1) % pp));
  g.prev_same_node = node(g.rank) == node(grid.rank_at(c.tp, c.cp, c.dp, (st - 1 + pp) % pp));
  g.embedding_same_node =
      node(grid.rank_at(c.tp, c.cp, c.dp, 0)) == node(grid.rank_at(c.tp, c.cp, c.dp, pp - 1));
  return g;
}

}  // namespace mplan::sim
