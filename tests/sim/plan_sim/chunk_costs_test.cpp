// Chunk costs: units in backward order summing to the chunk; Megatron's recomputation forms
// (uniform groups of recompute_num_layers with their inputs kept, block: the first layers one by
// one, selective: the attention core); the stage's parameters equal rank_params(); gradient
// buckets of max(40 M, 1 M x dp) parameters on the first chunk of the first stage only.
#include "sim/plan_sim/chunk_costs.hpp"

#include <gtest/gtest.h>

#include "src/model/model_stats.hpp"
#include "tests/sim/plan_sim/test_plans.hpp"

namespace mplan::sim {
namespace {

using testing::gpt;
using testing::plan;

ChunkTable chunks_of(const Plan& pl, PlanCosts& costs) {
  std::vector<int64_t> scratch;
  RankGrid grid(pl.parallel);
  build_plan_costs(
      pl, {}, stage_groups(grid, pl.cluster.gpus_per_node, 0, scratch, cp_a2a_size(pl.parallel)),
      false, costs);
  ChunkTable t;
  for (int64_t s = 0; s < pl.parallel.pp; ++s) append_stage_chunks(pl, costs, s, t);
  return t;
}

TEST(ChunkCosts, UnitsInBackwardOrderAddUp) {
  Plan pl = plan(gpt(8, 1024, 16, 1024, 1000), testing::toy_cluster(), 1, 2, 1, 1, 4);
  pl.parallel.vpp = 2;
  pl.parallel.schedule = ScheduleKind::kInterleaved;
  PlanCosts c;
  const ChunkTable t = chunks_of(pl, c);
  ASSERT_EQ(t.chunks.size(), 4u);
  // Stage 0 chunk 0: layers 0-1 + embedding; stage 1 chunk 1: layers 6-7 + output.
  const ChunkCosts& first = t.at(0, 0);
  EXPECT_EQ(first.first_layer, 0);
  EXPECT_TRUE(first.has_embedding);
  ASSERT_EQ(first.unit_end - first.unit_begin, 3);
  EXPECT_EQ(t.units[first.unit_begin].layer, 1);
  EXPECT_EQ(t.units[first.unit_begin + 1].layer, 0);
  EXPECT_EQ(t.units[first.unit_begin + 2].kind, ChunkUnit::kEmbedding);
  const ChunkCosts& last = t.at(1, 1);
  EXPECT_EQ(last.first_layer, 6);
  EXPECT_EQ(t.units[last.unit_begin].kind, ChunkUnit::kOutput);
  EXPECT_EQ(t.at(1, 0).first_layer, 2);
  EXPECT_EQ(t.at(0, 1).first_layer, 4);
  for (const ChunkCosts& ch : t.chunks) {
    PassCost f, b;
    for (int32_t u = ch.unit_begin; u < ch.unit_end; ++u) f += t.units[u].fwd, b += t.units[u].bwd;
    EXPECT_EQ(f, ch.fwd);
    EXPECT_EQ(b, ch.bwd);
  }
}

TEST(ChunkCosts, StageParametersEqualRankParams) {
  for (int64_t tp : {1, 2, 4}) {
    ModelSpec m = gpt(8, 1024, 16, 1024, 1000);
    Plan pl = plan(m, testing::toy_cluster(), tp, 2, 1, 1, 4);
    PlanCosts c;
    const ChunkTable t = chunks_of(pl, c);
    for (int64_t s = 0; s < 2; ++s)
      EXPECT_EQ(t.at(s, 0).dense_params + t.at(s, 0).expert_params,
                rank_params(m, pl.parallel, s).total())
          << "tp " << tp << " stage " << s;
  }
  ModelSpec moe = gpt(4, 1024, 16, 1024, 1000);
  moe.moe = MoeSpec{8, 2, 1536, 512, 2};
  moe.tied_embeddings = false;
  moe.activation = Activation::kSwiglu;
  Plan pl = plan(moe, testing::toy_cluster(), 2, 1, 4, 1, 4);
  pl.parallel.ep = 4;
  pl.parallel.etp = 2;
  PlanCosts c;
  const ChunkTable t = chunks_of(pl, c);
  const StageParams rp = rank_params(moe, pl.parallel, 0);
  EXPECT_EQ(t.at(0, 0).dense_params, rp.non_expert);
  EXPECT_EQ(t.at(0, 0).expert_params, rp.expert);
}

TEST(ChunkCosts, RecomputeForms) {
  Plan pl = plan(gpt(8, 1024, 16, 1024, 1000), testing::toy_cluster(), 1, 2, 1, 1, 4);
  pl.parallel.recompute = Recompute::kFull;
  pl.parallel.recompute_num_layers = 2;
  PlanCosts c;
  ChunkTable t = chunks_of(pl, c);
  const ChunkCosts& mid = t.at(1, 0);  // layers 4-7 and the output layer
  const LayerCosts& l = c.dense;
  // Uniform: groups {4,5} and {6,7}; each recomputed when the backward reaches its last layer.
  EXPECT_EQ(t.units[mid.unit_begin + 1].layer, 7);
  EXPECT_EQ(t.units[mid.unit_begin + 1].recompute_first, 6);
  EXPECT_EQ(t.units[mid.unit_begin + 1].recompute_count, 2);
  EXPECT_EQ(t.units[mid.unit_begin + 2].recompute_count, 0);
  EXPECT_EQ(t.units[mid.unit_begin + 3].recompute_first, 4);
  EXPECT_EQ(mid.act_bytes, 2 * l.ckpt_bytes + c.output.act_bytes);
  EXPECT_EQ(mid.recompute_bytes, 2 * l.act_full_bytes);
  EXPECT_EQ(mid.bwd.total_ns(),
            c.output.bwd.cost.total_ns() + 4 * (l.fwd.cost.total_ns() + l.bwd.cost.total_ns()));

  pl.parallel.recompute_method = RecomputeMethod::kBlock;
  pl.parallel.recompute_num_layers = 1;
  t = chunks_of(pl, c);
  const ChunkCosts& blk = t.at(1, 0);
  // Block: only the chunk's first layer (4) is recomputed; 5-7 keep everything.
  EXPECT_EQ(t.units[blk.unit_end - 1].layer, 4);
  EXPECT_EQ(t.units[blk.unit_end - 1].recompute_count, 1);
  EXPECT_EQ(blk.act_bytes, l.ckpt_bytes + 3 * l.act_full_bytes + c.output.act_bytes);
  EXPECT_EQ(blk.recompute_bytes, l.act_full_bytes);

  pl.parallel.recompute = Recompute::kSelective;
  pl.training.attention_backend = AttentionBackend::kUnfused;
  t = chunks_of(pl, c);
  const ChunkCosts& sel = t.at(1, 0);
  EXPECT_TRUE(t.units[sel.unit_begin + 1].recompute_attention);
  EXPECT_EQ(sel.act_bytes, 4 * l.act_bytes + c.output.act_bytes);
  EXPECT_LT(l.act_bytes, l.act_full_bytes);  // scores not kept
  EXPECT_EQ(sel.recompute_bytes, l.act_full_bytes - l.act_bytes);
  EXPECT_EQ(sel.bwd.total_ns(), c.output.bwd.cost.total_ns() +
                                    4 * (l.attn_fwd.cost.total_ns() + l.bwd.cost.total_ns()));
}

TEST(ChunkCosts, GradientBuckets) {
  // 24 layers of 12 h² + 13 h = 12.6 M parameters; embedding 32 000 x 1024 + 2048 x 1024.
  ModelSpec m = gpt(24, 1024, 16, 2048, 32000);
  Plan pl = plan(m, testing::toy_cluster(), 1, 2, 8, 1, 8);
  EXPECT_EQ(default_grad_bucket_elems(pl.parallel), 40000000);
  pl.parallel.dp = 64;
  EXPECT_EQ(default_grad_bucket_elems(pl.parallel), 64000000);
  pl.parallel.dp = 8;
  PlanCosts c;
  const ChunkTable t = chunks_of(pl, c);
  const ChunkCosts& first = t.at(0, 0);
  // 12 layers: buckets close after 4 layers (>= 40 M), three of them, then the embedding.
  ASSERT_EQ(first.bucket_end - first.bucket_begin, 4);
  const int64_t layer = c.dense.dense_params;
  EXPECT_EQ(layer, 12 * 1024 * 1024 + 13 * 1024);
  EXPECT_EQ(t.buckets[first.bucket_begin].numel, 4 * layer);
  EXPECT_EQ(t.buckets[first.bucket_begin].last_unit, 3);
  EXPECT_EQ(t.buckets[first.bucket_begin + 3].numel, c.embedding.params);
  EXPECT_TRUE(first.bucketed);
  // Other stages: one bucket (Megatron turns bucketing off there).
  const ChunkCosts& second = t.at(1, 0);
  ASSERT_EQ(second.bucket_end - second.bucket_begin, 1);
  EXPECT_EQ(t.buckets[second.bucket_begin].numel, second.dense_params);
  EXPECT_FALSE(second.bucketed);
  // Without overlapped reduction: one bucket on the first stage too.
  pl.parallel.overlap_grad_reduce = false;
  const ChunkTable u = chunks_of(pl, c);
  EXPECT_EQ(u.at(0, 0).bucket_end - u.at(0, 0).bucket_begin, 1);
}

}  // namespace
}  // namespace mplan::sim
