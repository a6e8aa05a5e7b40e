// Tests of RankGrid against Megatron-LM: the documented 16-GPU example, 8-GPU cases worked out by
// hand from generate_masked_orthogonal_rank_groups for both orders and for an expert grid, the
// RankGenerator cases of Megatron's tests/unit_tests/test_parallel_state.py (with its independent
// "golden past code" loops rewritten here), properties over many shapes, and rejected layouts.
#include "src/parallel/rank_grid.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <tuple>

#include "src/common/error.hpp"
#include "src/plan/plan.hpp"
#include "src/plan/validate.hpp"

namespace mplan {
namespace {

using Groups = std::vector<std::vector<int>>;

ParallelConfig cfg(int tp, int cp, int pp, int dp, int ep = 1, int etp = -1,
                   const std::string& order = "tp-cp-ep-dp-pp") {
  ParallelConfig p;
  p.tp = tp;
  p.cp = cp;
  p.pp = pp;
  p.dp = dp;
  p.ep = ep;
  p.etp = etp < 0 ? tp : etp;
  p.order = order;
  return p;
}

Groups singletons(int n) {
  Groups g;
  for (int i = 0; i < n; ++i) g.push_back({i});
  return g;
}

// ---- Megatron's documented example (initialize_model_parallel docstring) ----------------------

TEST(RankGrid, MegatronDocstring16GpusTp2Pp4) {
  RankGrid g(cfg(2, 1, 4, 2));
  EXPECT_EQ(g.world_size(), 16);
  EXPECT_EQ(g.groups(GroupKind::kDp),
            (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {12, 14}, {13, 15}}));
  EXPECT_EQ(g.groups(GroupKind::kTp),
            (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}}));
  EXPECT_EQ(g.groups(GroupKind::kPp),
            (Groups{{0, 4, 8, 12}, {1, 5, 9, 13}, {2, 6, 10, 14}, {3, 7, 11, 15}}));
  // By hand: model parallel = the tp·pp ranks sharing a dp index (dp stride 2).
  EXPECT_EQ(g.groups(GroupKind::kTpPp),
            (Groups{{0, 1, 4, 5, 8, 9, 12, 13}, {2, 3, 6, 7, 10, 11, 14, 15}}));
  EXPECT_EQ(g.groups(GroupKind::kTpDp),
            (Groups{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}, {12, 13, 14, 15}}));
  EXPECT_EQ(g.groups(GroupKind::kEmbedding), (Groups{{0, 12}, {1, 13}, {2, 14}, {3, 15}}));
  EXPECT_EQ(g.groups(GroupKind::kPositionEmbedding), (Groups{{0}, {1}, {2}, {3}}));
  EXPECT_EQ(g.groups(GroupKind::kCp), singletons(16));
  EXPECT_EQ(g.groups(GroupKind::kEp), singletons(16));
}

// ---- 8 GPUs, tp 2, pp 2, dp 2, both orders (worked out by hand) -------------------------------

TEST(RankGrid, EightGpusDefaultOrder) {
  // tp-cp-ep-dp-pp: strides tp 1, dp 2, pp 4.
  RankGrid g(cfg(2, 1, 2, 2));
  EXPECT_EQ(g.order(), "tp-cp-ep-dp-pp");
  EXPECT_EQ(g.groups(GroupKind::kTp), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(g.groups(GroupKind::kDp), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(g.groups(GroupKind::kPp), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(g.groups(GroupKind::kCp), singletons(8));
  EXPECT_EQ(g.groups(GroupKind::kDpCp), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(g.groups(GroupKind::kTpPp), (Groups{{0, 1, 4, 5}, {2, 3, 6, 7}}));
  EXPECT_EQ(g.groups(GroupKind::kTpCp), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(g.groups(GroupKind::kTpDp), (Groups{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(g.groups(GroupKind::kTpDpCp), (Groups{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(g.groups(GroupKind::kEmbedding), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(g.groups(GroupKind::kPositionEmbedding), (Groups{{0}, {1}, {2}, {3}}));
  // Expert grid with etp = tp, ep 1: expert dp = 8 / (2·1·2) = 2, same layout as the decoder.
  EXPECT_EQ(g.groups(GroupKind::kEp), singletons(8));
  EXPECT_EQ(g.groups(GroupKind::kExpertTp), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(g.groups(GroupKind::kExpertDp), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(g.groups(GroupKind::kTpEp), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(g.groups(GroupKind::kTpEpPp), (Groups{{0, 1, 4, 5}, {2, 3, 6, 7}}));
  EXPECT_EQ(
      g.coord(6),
      (RankCoord{.tp = 0, .cp = 0, .dp = 1, .pp = 1, .ep = 0, .expert_tp = 0, .expert_dp = 1}));
}

TEST(RankGrid, EightGpusTpPpDpOrder) {
  // tp-cp-ep-pp-dp (--use-tp-pp-dp-mapping): strides tp 1, pp 2, dp 4.
  RankGrid g(cfg(2, 1, 2, 2, 1, -1, "tp-cp-ep-pp-dp"));
  EXPECT_EQ(g.order(), "tp-cp-ep-pp-dp");
  EXPECT_EQ(g.groups(GroupKind::kTp), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(g.groups(GroupKind::kPp), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(g.groups(GroupKind::kDp), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(g.groups(GroupKind::kCp), singletons(8));
  EXPECT_EQ(g.groups(GroupKind::kDpCp), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(g.groups(GroupKind::kTpPp), (Groups{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(g.groups(GroupKind::kTpCp), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(g.groups(GroupKind::kTpDp), (Groups{{0, 1, 4, 5}, {2, 3, 6, 7}}));
  EXPECT_EQ(g.groups(GroupKind::kTpDpCp), (Groups{{0, 1, 4, 5}, {2, 3, 6, 7}}));
  EXPECT_EQ(g.groups(GroupKind::kEmbedding), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(g.groups(GroupKind::kPositionEmbedding), (Groups{{0}, {1}, {4}, {5}}));
  EXPECT_EQ(g.groups(GroupKind::kExpertDp), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(g.groups(GroupKind::kTpEpPp), (Groups{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(
      g.coord(6),
      (RankCoord{.tp = 0, .cp = 0, .dp = 1, .pp = 1, .ep = 0, .expert_tp = 0, .expert_dp = 1}));
  EXPECT_EQ(g.coord(3).pp, 1);
  EXPECT_EQ(g.coord(3).dp, 0);
}

// ---- Expert parallel: 8 GPUs, tp 2, ep 2, etp 1, pp 2 (dp 2) ---------------------------------

TEST(RankGrid, ExpertGridEightGpus) {
  // Decoder: tp 1, dp 2, pp 4 strides. Expert grid (etp 1, ep 2, edp 8/(1·2·2) = 2, pp 2):
  // strides ep 1, edp 2, pp 4.
  RankGrid g(cfg(2, 1, 2, 2, /*ep=*/2, /*etp=*/1));
  EXPECT_EQ(g.expert_dp(), 2);
  EXPECT_EQ(g.groups(GroupKind::kTp), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(g.groups(GroupKind::kEp), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(g.groups(GroupKind::kExpertTp), singletons(8));
  EXPECT_EQ(g.groups(GroupKind::kExpertDp), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(g.groups(GroupKind::kTpEp), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(g.groups(GroupKind::kTpEpPp), (Groups{{0, 1, 4, 5}, {2, 3, 6, 7}}));
  EXPECT_EQ(g.groups(GroupKind::kPp), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(
      g.coord(5),
      (RankCoord{.tp = 1, .cp = 0, .dp = 0, .pp = 1, .ep = 1, .expert_tp = 0, .expert_dp = 0}));
  EXPECT_EQ(g.expert_rank_at(0, 1, 1, 1), 7);

  // tp 1, ep 4, etp 1, pp 1 on 8 GPUs: ep groups [0..3], [4..7]; expert dp [0,4], [1,5], ...
  RankGrid h(cfg(1, 1, 1, 8, 4, 1));
  EXPECT_EQ(h.groups(GroupKind::kEp), (Groups{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(h.groups(GroupKind::kExpertDp), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(h.groups(GroupKind::kDp), (Groups{{0, 1, 2, 3, 4, 5, 6, 7}}));

  // Expert tp wider than tp: tp 1, etp 2, ep 2 on 8 GPUs: expert strides etp 1, ep 2, edp 4.
  RankGrid e(cfg(1, 1, 1, 8, 2, 2));
  EXPECT_EQ(e.groups(GroupKind::kExpertTp), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(e.groups(GroupKind::kEp), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(e.groups(GroupKind::kTpEp), (Groups{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(e.groups(GroupKind::kExpertDp), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
}

TEST(RankGrid, ContextParallelEightGpus) {
  // The docstring's cp example: tp 4, cp 2 on 8 GPUs -> cp groups [0,4],[1,5],[2,6],[3,7].
  RankGrid g(cfg(4, 2, 1, 1));
  EXPECT_EQ(g.groups(GroupKind::kCp), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(g.groups(GroupKind::kTpCp), (Groups{{0, 1, 2, 3, 4, 5, 6, 7}}));
  EXPECT_EQ(g.groups(GroupKind::kDp), singletons(8));
  EXPECT_EQ(g.groups(GroupKind::kDpCp), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  // tp 2, cp 2, dp 2: dp-cp members in order cp fastest: strides tp 1, cp 2, dp 4.
  RankGrid h(cfg(2, 2, 1, 2));
  EXPECT_EQ(h.groups(GroupKind::kDpCp), (Groups{{0, 2, 4, 6}, {1, 3, 5, 7}}));
  EXPECT_EQ(h.groups(GroupKind::kDp), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(h.groups(GroupKind::kTpDp), (Groups{{0, 1, 4, 5}, {2, 3, 6, 7}}));
}

TEST(RankGrid, EmbeddingWithOneStage) {
  // default_embedding_ranks: a single-stage pipeline gives [pp_ranks[0]].
  RankGrid g(cfg(2, 1, 1, 2));
  EXPECT_EQ(g.group_size(GroupKind::kEmbedding), 1);
  EXPECT_EQ(g.groups(GroupKind::kEmbedding), singletons(4));
  EXPECT_EQ(g.groups(GroupKind::kPositionEmbedding), singletons(4));
  // pp 4: middle stages are in no embedding group.
  RankGrid h(cfg(1, 1, 4, 1));
  EXPECT_EQ(h.groups(GroupKind::kEmbedding), (Groups{{0, 3}}));
  EXPECT_EQ(h.group_index_of(GroupKind::kEmbedding, 1), -1);
  EXPECT_TRUE(h.group_of(GroupKind::kEmbedding, 2).empty());
  EXPECT_EQ(h.groups_of_rank(1).count("embedding"), 0u);
  EXPECT_EQ(h.groups_of_rank(3).at("embedding"), (std::vector<int>{0, 3}));
  EXPECT_EQ(h.groups_of_rank(3).count("position-embedding"), 0u);
}

TEST(RankGrid, GroupsOfRankMatchesExecutorType) {
  RankGrid g(cfg(2, 1, 2, 2));
  std::map<std::string, std::vector<int>> m = g.groups_of_rank(5);  // exec::GroupMembers
  EXPECT_EQ(m.size(), 15u);  // rank 5 is on the last stage: in every kind but position-embedding
  EXPECT_EQ(m.at("tp"), (std::vector<int>{4, 5}));
  EXPECT_EQ(m.at("dp"), (std::vector<int>{5, 7}));
  EXPECT_EQ(m.at("pp"), (std::vector<int>{1, 5}));
  EXPECT_EQ(m.at("tp-pp"), (std::vector<int>{0, 1, 4, 5}));
  EXPECT_EQ(m.at("embedding"), (std::vector<int>{1, 5}));
  EXPECT_EQ(m.count("position-embedding"), 0u);
}

TEST(RankGrid, OrderIsNormalizedLikeRankGenerator) {
  // Lower-cased, and the axes not listed appended in RankGenerator's name_to_size order.
  RankGrid g(cfg(2, 1, 2, 2, 1, -1, "TP-DP-PP"));
  EXPECT_EQ(g.order(), "tp-dp-pp-ep-cp");
  EXPECT_EQ(g.groups(GroupKind::kDp), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  RankGrid h(cfg(1, 1, 1, 4, 1, -1, "tp-dp"));
  EXPECT_EQ(h.order(), "tp-dp-pp-ep-cp");
}

TEST(RankGrid, Placement) {
  EXPECT_EQ(RankGrid::placement(0, 8), (RankPlacement{0, 0}));
  EXPECT_EQ(RankGrid::placement(13, 8), (RankPlacement{1, 5}));
  EXPECT_EQ(RankGrid::placement(13, 4), (RankPlacement{3, 1}));
  EXPECT_EQ(nodes_spanned({0, 4, 8, 12}, 8), 2);
  EXPECT_FALSE(crosses_nodes({0, 1}, 2));
  EXPECT_TRUE(crosses_nodes({1, 2}, 2));
}

// ---- Megatron's test_parallel_state.py ---------------------------------------------------------

// The "golden_rank_result_from_past_code" of test_rank_generator_for_tp_dp_pp: Megatron's
// earlier explicit loops, written out again here as an oracle independent of the masked
// algorithm. Expert groups use etp = tp as in that test.
struct Golden {
  Groups dp, dp_cp, cp, mp, tp, pp, tp_dp, tp_dp_cp, tp_ep, expert_dp;
};

Golden golden_past_code(int world, int tp, int pp, int cp, int ep) {
  Golden r;
  int dp = world / (tp * pp * cp);
  int num_pp_groups = world / pp;
  Groups all_dp_cp;
  for (int i = 0; i < pp; ++i) {
    int start = i * num_pp_groups, end = (i + 1) * num_pp_groups;
    for (int j = 0; j < cp * tp; ++j) {
      std::vector<int> g;
      for (int x = start + j; x < end; x += cp * tp) g.push_back(x);
      r.dp.push_back(g);
    }
    for (int j = 0; j < tp; ++j) {
      std::vector<int> g;
      for (int x = start + j; x < end; x += tp) g.push_back(x);
      all_dp_cp.push_back(g);
      r.dp_cp.push_back(g);
    }
  }
  for (int i = 0; i < pp; ++i)
    for (int j = 0; j < dp; ++j) {
      int start = i * num_pp_groups + j * tp * cp, end = i * num_pp_groups + (j + 1) * tp * cp;
      for (int k = 0; k < tp; ++k) {
        std::vector<int> g;
        for (int x = start + k; x < end; x += tp) g.push_back(x);
        r.cp.push_back(g);
      }
    }
  for (int i = 0; i < dp * cp; ++i) {
    std::vector<int> g;
    for (const auto& d : all_dp_cp) g.push_back(d[i]);
    r.mp.push_back(g);
  }
  for (int i = 0; i < world / tp; ++i) {
    std::vector<int> g;
    for (int x = i * tp; x < (i + 1) * tp; ++x) g.push_back(x);
    r.tp.push_back(g);
  }
  for (int i = 0; i < num_pp_groups; ++i) {
    std::vector<int> g;
    for (int x = i; x < world; x += num_pp_groups) g.push_back(x);
    r.pp.push_back(g);
  }
  int tdc = tp * dp * cp;
  for (int i = 0; i < world / tdc; ++i) {
    std::vector<int> all;
    for (int x = i * tdc; x < (i + 1) * tdc; ++x) all.push_back(x);
    r.tp_dp_cp.push_back(all);
    for (int j = 0; j < cp; ++j) {
      std::vector<int> g;
      for (int k = 0; k < dp; ++k) {
        int start = i * tdc + j * tp + k * tp * cp;
        for (int x = start; x < start + tp; ++x) g.push_back(x);
      }
      r.tp_dp.push_back(g);
    }
  }
  // all_ranks reshaped to (pp, edp, ep, tp) row-major.
  int edp = world / (tp * pp * ep);
  auto at = [&](int p, int d, int e, int t) { return ((p * edp + d) * ep + e) * tp + t; };
  for (int p = 0; p < pp; ++p)
    for (int d = 0; d < edp; ++d) {
      std::vector<int> g;
      for (int e = 0; e < ep; ++e)
        for (int t = 0; t < tp; ++t) g.push_back(at(p, d, e, t));
      r.tp_ep.push_back(g);
    }
  for (int p = 0; p < pp; ++p)  // permute to (pp, ep, tp, edp), rows of edp
    for (int e = 0; e < ep; ++e)
      for (int t = 0; t < tp; ++t) {
        std::vector<int> g;
        for (int d = 0; d < edp; ++d) g.push_back(at(p, d, e, t));
        r.expert_dp.push_back(g);
      }
  return r;
}

TEST(RankGrid, MegatronRankGeneratorGoldenCases) {
  // (nodes, gpus per node, tp, pp, cp, ep) from test_rank_generator_for_tp_dp_pp.
  const std::vector<std::tuple<int, int, int, int, int, int>> cases = {
      {1, 1, 1, 1, 1, 1},    {1, 8, 8, 1, 1, 1},    {1, 8, 2, 2, 1, 1},   {1, 8, 2, 4, 1, 1},
      {3, 8, 8, 3, 1, 1},    {4, 8, 2, 4, 1, 1},    {8, 8, 8, 8, 1, 1},   {8, 8, 2, 1, 1, 4},
      {8, 8, 2, 2, 2, 4},    {8, 8, 2, 1, 4, 8},    {8, 8, 2, 2, 2, 8},   {16, 8, 4, 8, 1, 1},
      {16, 8, 4, 8, 1, 4},   {16, 8, 4, 8, 4, 1},   {16, 8, 8, 8, 1, 1},  {16, 8, 4, 8, 1, 1},
      {16, 8, 8, 8, 1, 1},   {32, 8, 4, 8, 1, 1},   {32, 8, 8, 8, 1, 1},  {32, 8, 4, 8, 1, 4},
      {32, 8, 8, 8, 4, 1},   {64, 8, 4, 2, 8, 8},   {64, 8, 4, 8, 1, 1},  {64, 8, 8, 8, 1, 1},
      {96, 8, 4, 8, 1, 1},   {128, 8, 4, 2, 8, 8},  {128, 8, 4, 8, 1, 1}, {256, 8, 4, 8, 1, 1},
      {316, 8, 4, 8, 1, 1},  {384, 8, 4, 8, 1, 1},  {512, 8, 4, 8, 1, 1}, {768, 8, 4, 8, 1, 1},
      {1024, 8, 4, 8, 1, 1}, {1280, 8, 4, 8, 1, 1}, {1344, 8, 4, 8, 1, 1}};
  EXPECT_EQ(cases.size(), 35u);
  for (const auto& [nodes, gpus, tp, pp, cp, ep] : cases) {
    int world = nodes * gpus;
    SCOPED_TRACE(testing::Message() << "world " << world << " tp " << tp << " pp " << pp << " cp "
                                    << cp << " ep " << ep);
    int dp = world / (tp * pp * cp);
    // The test builds RankGenerator(order="tp-cp-dp-pp") and the expert one with "tp-ep-dp-pp";
    // RankGenerator completes both to the same axis order as the default tp-cp-ep-dp-pp.
    RankGrid g(cfg(tp, cp, pp, dp, ep, tp, "tp-cp-ep-dp-pp"));
    Golden ref = golden_past_code(world, tp, pp, cp, ep);
    EXPECT_EQ(g.groups(GroupKind::kDp), ref.dp);
    EXPECT_EQ(g.groups(GroupKind::kDpCp), ref.dp_cp);
    EXPECT_EQ(g.groups(GroupKind::kCp), ref.cp);
    EXPECT_EQ(g.groups(GroupKind::kTpPp), ref.mp);
    EXPECT_EQ(g.groups(GroupKind::kTp), ref.tp);
    EXPECT_EQ(g.groups(GroupKind::kPp), ref.pp);
    EXPECT_EQ(g.groups(GroupKind::kTpDp), ref.tp_dp);
    EXPECT_EQ(g.groups(GroupKind::kTpDpCp), ref.tp_dp_cp);
    EXPECT_EQ(g.groups(GroupKind::kTpEp), ref.tp_ep);
    EXPECT_EQ(g.groups(GroupKind::kExpertDp), ref.expert_dp);
  }
}

// The per-rank tests of test_parallel_state.py, run with its world size 8 for both of its orders.
TEST(RankGrid, MegatronPerRankTests) {
  const int world = 8;
  for (std::string order : {"tp-cp-ep-dp-pp", "tp-cp-pp-ep-dp"}) {
    SCOPED_TRACE(order);
    // test_pipeline_parallel_initializations: tp 2, pp 4.
    RankGrid a(cfg(2, 1, 4, 1, 1, -1, order));
    for (int r = 0; r < world; ++r) {
      auto pp = a.group_of(GroupKind::kPp, r);
      auto it = std::find(pp.begin(), pp.end(), r);
      int i = static_cast<int>(it - pp.begin());
      EXPECT_EQ(pp.front(), r % 2);                                             // first rank
      EXPECT_EQ(pp[(i + 1) % pp.size()], (r + 2) % world);                      // next rank
      EXPECT_EQ(pp[(i + pp.size() - 1) % pp.size()], (r - 2 + world) % world);  // prev rank
      EXPECT_EQ(a.group_of(GroupKind::kDp, r).front(), r);                      // dp src rank
    }
    // test_data_parallel_initializations / pipeline world size and rank: pp = world.
    RankGrid b(cfg(1, 1, world, 1, 1, -1, order));
    EXPECT_EQ(b.group_size(GroupKind::kDp), 1);
    EXPECT_EQ(b.group_size(GroupKind::kPp), world);
    for (int r = 0; r < world; ++r) {
      EXPECT_EQ(b.coord(r).dp, 0);
      EXPECT_EQ(b.coord(r).pp, r);
      EXPECT_EQ(b.group_of(GroupKind::kDp, r).front(), r);
    }
    EXPECT_EQ(b.coord(0).pp, 0);                  // is_pipeline_first_stage only on rank 0
    EXPECT_EQ(b.coord(world - 1).pp, world - 1);  // last stage only on the last rank
    // tensor model parallel world size / rank / src rank: tp = world.
    RankGrid c(cfg(world, 1, 1, 1, 1, -1, order));
    EXPECT_EQ(c.group_size(GroupKind::kTp), world);
    for (int r = 0; r < world; ++r) {
      EXPECT_EQ(c.coord(r).tp, r);
      EXPECT_EQ(c.group_of(GroupKind::kTp, r).front(), (r / world) * world);
    }
    // expert tensor parallel world size / rank: etp = world with tp 1.
    RankGrid d(cfg(1, 1, 1, world, 1, world, order));
    EXPECT_EQ(d.group_size(GroupKind::kExpertTp), world);
    for (int r = 0; r < world; ++r) EXPECT_EQ(d.coord(r).expert_tp, r);
  }
  // test_context_parallel_rank and test_expert_model_parallel_rank (default order).
  RankGrid e(cfg(1, world, 1, 1));
  RankGrid f(cfg(1, 1, 1, world, world, 1));
  for (int r = 0; r < world; ++r) {
    EXPECT_EQ(e.coord(r).cp, r);
    EXPECT_EQ(f.coord(r).ep, r);
  }
}

// test_different_initialize_order_consistency / _unconsistency (world size 8).
TEST(RankGrid, MegatronOrderConsistency) {
  const std::vector<GroupKind> compared = {GroupKind::kTp,       GroupKind::kDp,  GroupKind::kPp,
                                           GroupKind::kExpertDp, GroupKind::kCp,  GroupKind::kTpPp,
                                           GroupKind::kTpEp,     GroupKind::kTpDp};
  const std::vector<std::tuple<int, int, int>> same = {{1, 8, 1}, {2, 4, 1}, {4, 2, 1}, {8, 1, 1},
                                                       {4, 1, 2}, {1, 1, 8}, {2, 1, 4}};
  for (const auto& [tp, pp, ep] : same) {
    SCOPED_TRACE(testing::Message() << "tp " << tp << " pp " << pp << " ep " << ep);
    int dp = 8 / (tp * pp);
    RankGrid a(cfg(tp, 1, pp, dp, ep, tp, "tp-ep-dp-pp"));
    RankGrid b(cfg(tp, 1, pp, dp, ep, tp, "tp-pp-ep-dp"));
    for (int r = 0; r < 8; ++r) {
      EXPECT_EQ(a.coord(r), b.coord(r));
      for (GroupKind k : compared) EXPECT_EQ(a.group_of(k, r), b.group_of(k, r)) << to_string(k);
    }
  }
  // Unconsistency with ep 1: tp and cp groups agree, dp, pp and model-parallel groups differ.
  for (const auto& [tp, pp] : std::vector<std::pair<int, int>>{{1, 2}, {1, 4}, {2, 2}}) {
    SCOPED_TRACE(testing::Message() << "tp " << tp << " pp " << pp);
    int dp = 8 / (tp * pp);
    RankGrid a(cfg(tp, 1, pp, dp, 1, tp, "tp-ep-dp-pp"));
    RankGrid b(cfg(tp, 1, pp, dp, 1, tp, "tp-pp-ep-dp"));
    EXPECT_EQ(a.group_of(GroupKind::kTp, 0), b.group_of(GroupKind::kTp, 0));
    EXPECT_EQ(a.group_of(GroupKind::kCp, 0), b.group_of(GroupKind::kCp, 0));
    EXPECT_NE(a.group_of(GroupKind::kDp, 0), b.group_of(GroupKind::kDp, 0));
    EXPECT_NE(a.group_of(GroupKind::kPp, 0), b.group_of(GroupKind::kPp, 0));
    EXPECT_NE(a.group_of(GroupKind::kTpPp, 0), b.group_of(GroupKind::kTpPp, 0));
    EXPECT_NE(a.group_of(GroupKind::kTpDp, 0), b.group_of(GroupKind::kTpDp, 0));
    // With ep 2 the current initialize_model_parallel refuses 'tp-pp-ep-dp': expert dp
    // (8 / (tp·2·pp)) differs from dp and the order does not end in pp.
    EXPECT_FALSE(rank_grid_problems(cfg(tp, 1, pp, dp, 2, tp, "tp-pp-ep-dp")).empty());
    EXPECT_TRUE(rank_grid_problems(cfg(tp, 1, pp, dp, 2, tp, "tp-ep-dp-pp")).empty());
  }
}

// ---- Properties over many shapes ---------------------------------------------------------------

// Every layout of the orders and sizes below that Megatron accepts (up to 96 GPUs): the product
// order x tp x cp x pp x dp x ep x etp, the last axis fastest.
std::vector<ParallelConfig> accepted_shapes() {
  const std::vector<std::string> orders = {"tp-cp-ep-dp-pp", "tp-cp-ep-pp-dp", "tp-pp-cp-ep-dp",
                                           "dp-pp-tp-cp-ep"};
  const std::vector<std::vector<int>> axes = {{1, 2, 4}, {1, 2}, {1, 2, 3, 4}, {1, 2, 4, 6},
                                              {1, 2, 4}, {1, 2}};  // tp cp pp dp ep etp
  std::vector<size_t> radix = {orders.size()};
  for (const auto& a : axes) radix.push_back(a.size());
  std::vector<ParallelConfig> out;
  std::vector<size_t> at(radix.size(), 0);
  for (bool more = true; more;) {
    auto v = [&](size_t axis) { return axes[axis][at[axis + 1]]; };
    ParallelConfig p = cfg(v(0), v(1), v(2), v(3), v(4), v(5), orders[at[0]]);
    if (rank_grid_problems(p).empty()) out.push_back(p);
    // Next index: count up the last axis, carrying into the ones before it.
    size_t a = radix.size();
    while (a > 0 && ++at[a - 1] == radix[a - 1]) at[--a] = 0;
    more = a > 0;
  }
  return out;
}

// Coordinates round-trip through both grids, and each grid gives every rank its own.
void expect_coordinates_round_trip(const RankGrid& g) {
  const int world = g.world_size();
  std::set<std::tuple<int, int, int, int>> dec, exp;
  for (int r = 0; r < world; ++r) {
    RankCoord c = g.coord(r);
    ASSERT_EQ(g.rank_at(c.tp, c.cp, c.dp, c.pp), r);
    ASSERT_EQ(g.expert_rank_at(c.expert_tp, c.ep, c.expert_dp, c.pp), r);
    dec.insert({c.tp, c.cp, c.dp, c.pp});
    exp.insert({c.expert_tp, c.ep, c.expert_dp, c.pp});
  }
  ASSERT_EQ(static_cast<int>(dec.size()), world);
  ASSERT_EQ(static_cast<int>(exp.size()), world);
}

// The size of a group of kind `k`, from the parallel sizes.
int expected_group_size(const ParallelConfig& p, int edp, GroupKind k) {
  const int tp = static_cast<int>(p.tp), cp = static_cast<int>(p.cp);
  const int pp = static_cast<int>(p.pp), dp = static_cast<int>(p.dp);
  const int ep = static_cast<int>(p.ep), etp = static_cast<int>(p.etp);
  const std::map<GroupKind, int> size = {{GroupKind::kTp, tp},
                                         {GroupKind::kPp, pp},
                                         {GroupKind::kDp, dp},
                                         {GroupKind::kCp, cp},
                                         {GroupKind::kDpCp, dp * cp},
                                         {GroupKind::kTpPp, tp * pp},
                                         {GroupKind::kTpCp, tp * cp},
                                         {GroupKind::kTpDp, tp * dp},
                                         {GroupKind::kTpDpCp, tp * dp * cp},
                                         {GroupKind::kEp, ep},
                                         {GroupKind::kExpertTp, etp},
                                         {GroupKind::kExpertDp, edp},
                                         {GroupKind::kTpEp, etp * ep},
                                         {GroupKind::kTpEpPp, etp * ep * pp},
                                         {GroupKind::kEmbedding, pp == 1 ? 1 : 2},
                                         {GroupKind::kPositionEmbedding, 1}};
  return size.at(k);
}

// Groups of kind `k` have the expected size, know their index, and cover each rank as often as
// the kind says: once, or (embedding groups) on the first and last stage only.
void expect_groups_cover_ranks(const RankGrid& g, const ParallelConfig& p, GroupKind k) {
  const int world = g.world_size();
  auto groups = g.groups(k);
  std::vector<int> seen(world, 0);
  for (int i = 0; i < static_cast<int>(groups.size()); ++i) {
    ASSERT_EQ(static_cast<int>(groups[i].size()), expected_group_size(p, g.expert_dp(), k))
        << to_string(k);
    for (int r : groups[i]) {
      ASSERT_TRUE(r >= 0 && r < world);
      ++seen[r];
      ASSERT_EQ(g.group_index_of(k, r), i) << to_string(k);
    }
  }
  for (int r = 0; r < world; ++r) {
    int stage = g.coord(r).pp;
    int expect = group_kind_covers_world(k)   ? 1
                 : k == GroupKind::kEmbedding ? (stage == 0 || stage == p.pp - 1)
                                              : (stage == 0);
    ASSERT_EQ(seen[r], expect) << to_string(k) << " rank " << r;
  }
}

// Single-axis groups of rank r: member i has that coordinate i, the others fixed; the pp groups
// of both grids coincide (Megatron asserts it).
void expect_single_axis_groups(const RankGrid& g, int r) {
  RankCoord c = g.coord(r);
  auto tpg = g.group_of(GroupKind::kTp, r);
  for (int i = 0; i < g.tp(); ++i) ASSERT_EQ(tpg[i], g.rank_at(i, c.cp, c.dp, c.pp));
  auto cpg = g.group_of(GroupKind::kCp, r);
  for (int i = 0; i < g.cp(); ++i) ASSERT_EQ(cpg[i], g.rank_at(c.tp, i, c.dp, c.pp));
  auto dpg = g.group_of(GroupKind::kDp, r);
  for (int i = 0; i < g.dp(); ++i) ASSERT_EQ(dpg[i], g.rank_at(c.tp, c.cp, i, c.pp));
  auto ppg = g.group_of(GroupKind::kPp, r);
  for (int i = 0; i < g.pp(); ++i) ASSERT_EQ(ppg[i], g.rank_at(c.tp, c.cp, c.dp, i));
  auto epg = g.group_of(GroupKind::kEp, r);
  for (int i = 0; i < g.ep(); ++i)
    ASSERT_EQ(epg[i], g.expert_rank_at(c.expert_tp, i, c.expert_dp, c.pp));
  auto edpg = g.group_of(GroupKind::kExpertDp, r);
  for (int i = 0; i < g.expert_dp(); ++i)
    ASSERT_EQ(edpg[i], g.expert_rank_at(c.expert_tp, c.ep, i, c.pp));
  for (int i = 0; i < g.pp(); ++i)
    ASSERT_EQ(ppg[i], g.expert_rank_at(c.expert_tp, c.ep, c.expert_dp, i));
  ASSERT_EQ(g.groups_of_rank(r).at("tp"), tpg);
}

TEST(RankGrid, PropertiesOverManyShapes) {
  int checked = 0;
  for (const ParallelConfig& p : accepted_shapes()) {
    ++checked;
    RankGrid g(p);
    const int world = static_cast<int>(p.tp * p.cp * p.pp * p.dp);
    SCOPED_TRACE(testing::Message() << p.order << " tp " << p.tp << " cp " << p.cp << " pp " << p.pp
                                    << " dp " << p.dp << " ep " << p.ep << " etp " << p.etp);
    ASSERT_EQ(g.world_size(), world);
    ASSERT_EQ(g.expert_dp() * p.etp * p.ep * p.pp, world);
    expect_coordinates_round_trip(g);
    for (GroupKind k : all_group_kinds()) expect_groups_cover_ranks(g, p, k);
    for (int r = 0; r < world; ++r) expect_single_axis_groups(g, r);
  }
  EXPECT_GT(checked, 500);
}

TEST(RankGrid, LargeWorldIsCheap) {
  // 16384 GPUs: sizes, coordinates and one rank's groups without building every group.
  RankGrid g(cfg(8, 2, 16, 64, 8, 1));
  EXPECT_EQ(g.world_size(), 16384);
  EXPECT_EQ(g.num_groups(GroupKind::kTp), 2048);
  EXPECT_EQ(g.group_size(GroupKind::kDpCp), 128);
  EXPECT_EQ(g.expert_dp(), 128);
  EXPECT_EQ(g.group_of(GroupKind::kPp, 16383).front(), 16383 - 15 * 1024);
  auto m = g.groups_of_rank(12345);
  EXPECT_EQ(m.at("tp").size(), 8u);
  EXPECT_EQ(m.at("tp-ep-pp").size(), 128u);
}

// ---- Rejected layouts --------------------------------------------------------------------------

std::string first_problem(const ParallelConfig& p) {
  auto v = rank_grid_problems(p);
  return v.empty() ? "" : v.front().field + ": " + v.front().message;
}

TEST(RankGrid, RejectsWhatMegatronRejects) {
  // Expert grid does not divide the world: 6 GPUs, etp 1 x ep 4 x pp 1.
  EXPECT_EQ(first_problem(cfg(2, 1, 1, 3, 4, 1)),
            "parallel.ep: world_size (6) is not divisible by "
            "expert_tensor_model_pipeline_parallel size (etp x ep x pp = 4)");
  // Order tokens.
  EXPECT_NE(first_problem(cfg(2, 1, 2, 2, 1, -1, "tp-xp-dp-pp")).find("unknown axis 'xp'"),
            std::string::npos);
  EXPECT_NE(first_problem(cfg(2, 1, 2, 2, 1, -1, "tp-tp-dp-pp")).find("appears twice"),
            std::string::npos);
  EXPECT_NE(first_problem(cfg(2, 1, 2, 2, 1, -1, "")).find("empty axis name"), std::string::npos);
  EXPECT_NE(first_problem(cfg(2, 1, 2, 2, 1, -1, "tp--pp")).find("empty axis name"),
            std::string::npos);
  // An axis of size > 1 missing from the order (decoder grid).
  EXPECT_EQ(first_problem(cfg(2, 1, 2, 2, 1, -1, "tp-dp")),
            "parallel.order: pp is 2 but order 'tp-dp' does not list pp");
  // ... and on the expert grid only: dp 1 but expert dp = 2 / (1·1·1) = 2.
  EXPECT_NE(first_problem(cfg(2, 1, 1, 1, 1, 1, "tp-cp-ep-pp")).find("expert grid's dp"),
            std::string::npos);
  // ep > 1 needs ep in the order, even though the decoder grid does not use it.
  EXPECT_NE(first_problem(cfg(1, 1, 1, 4, 2, 1, "tp-cp-dp-pp")).find("expert grid's ep"),
            std::string::npos);
  // tp must be listed even at size 1: initialize_model_parallel's 'gtp_remat' axis hides its
  // absence from RankGenerator's substring test, and building the tp groups then fails.
  EXPECT_NE(first_problem(cfg(1, 1, 2, 2, 1, -1, "dp-pp")).find("must list tp"), std::string::npos);
  // Megatron tests "ends with pp" on the order as given: upper case fails it (here expert dp
  // 8 / (1·1·2) = 4 differs from dp 2), though the order is otherwise lower-cased.
  EXPECT_NE(first_problem(cfg(2, 1, 2, 2, 1, 1, "TP-CP-EP-DP-PP")).find("does not end in pp"),
            std::string::npos);
  EXPECT_EQ(first_problem(cfg(2, 1, 2, 2, 1, 2, "TP-CP-EP-DP-PP")), "");
  // Axes of size 1 other than tp may be left out (RankGenerator appends them).
  EXPECT_EQ(first_problem(cfg(2, 1, 2, 2, 1, -1, "tp-dp-pp")), "");
  // Not pp-last: expert dp (8 / (1·1·2) = 4) must equal dp (2).
  EXPECT_NE(
      first_problem(cfg(2, 1, 2, 2, 1, 1, "tp-cp-ep-pp-dp")).find("does not end in pp and pp is 2"),
      std::string::npos);
  EXPECT_EQ(first_problem(cfg(2, 1, 2, 2, 1, 1, "tp-cp-ep-dp-pp")), "");  // pp last: fine
  EXPECT_EQ(first_problem(cfg(2, 1, 1, 4, 1, 1, "tp-cp-ep-pp-dp")), "");  // pp 1: fine
  EXPECT_EQ(first_problem(cfg(2, 1, 2, 2, 2, 1, "tp-cp-ep-pp-dp")), "");  // etp·ep = tp·cp
  // Same expert dp but different pp groups: order tp-pp-cp-ep-dp, tp 2 vs etp 1 x ep 2.
  EXPECT_NE(first_problem(cfg(2, 1, 2, 2, 2, 1, "tp-pp-cp-ep-dp")).find("different pipeline"),
            std::string::npos);
  // Sizes below 1.
  EXPECT_EQ(first_problem(cfg(0, 1, 1, 1)), "parallel.tp: must be >= 1, got 0");
  EXPECT_EQ(first_problem(cfg(1, 1, 1, 1, 1, 0)), "parallel.etp: must be >= 1, got 0");
  // The constructor throws the first problem as an mplan::Error.
  EXPECT_THROW(RankGrid(cfg(2, 1, 2, 2, 1, -1, "tp-dp")), Error);
  try {
    RankGrid(cfg(2, 1, 1, 3, 4, 1));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "parallel.ep: world_size (6) is not divisible by "
              "expert_tensor_model_pipeline_parallel size (etp x ep x pp = 4)");
  }
}

TEST(RankGrid, DataParallelSizeForWorld) {
  EXPECT_EQ(data_parallel_size_for_world(16, cfg(2, 1, 4, 1), "--gpus"), 2);
  // Megatron's test_initialize_and_destroy_model_parallel: tp = 2 x world is refused.
  EXPECT_THROW(data_parallel_size_for_world(8, cfg(16, 1, 1, 1), "--gpus"), Error);
  try {
    data_parallel_size_for_world(12, cfg(1, 1, 8, 1), "--gpus");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "--gpus: world size (12) is not divisible by tp x pp x cp (8)");
  }
}

TEST(RankGrid, ValidateReportsRankGridProblems) {
  Json j = parse_json(R"({"schema_version": 1, "model": "mixtral-8x7b", "cluster": "dgx-h100",
      "parallel": {"tp": 2, "pp": 2, "dp": 2, "ep": 2, "etp": 1, "order": "tp-pp-cp-ep-dp",
                   "micro_batch_size": 1, "global_batch_size": 8},
      "training": {"precision": "bf16"}})",
                      "test");
  Plan plan = plan_from_json(j);
  auto v = validate(plan);
  ASSERT_EQ(v.size(), 1u) << to_string(v.front());
  EXPECT_EQ(v[0].field, "parallel.order");
  EXPECT_NE(v[0].message.find("different pipeline groups"), std::string::npos);
  // The expert-grid divisibility rule is reported once, not twice.
  plan.parallel.order = "tp-cp-ep-dp-pp";
  plan.parallel.ep = 8;  // 8 GPUs, etp 1 x ep 8 x pp 2 = 16
  v = validate(plan);
  int count = 0;
  for (const auto& x : v) count += x.message.find("etp x ep x pp") != std::string::npos;
  EXPECT_EQ(count, 1);
}

}  // namespace
}  // namespace mplan
