// Tests of Megatron's layer placement: the examples in Megatron's own comments, an uneven split
// with virtual stages worked out by hand, and the partition property over many shapes.
#include "src/model/layer_range.hpp"

#include <gtest/gtest.h>

#include "src/common/error.hpp"

namespace mplan {
namespace {

ParallelConfig pipeline(int64_t pp, int64_t vpp) {
  ParallelConfig p;
  p.pp = pp;
  p.vpp = vpp;
  return p;
}

TEST(LayerRange, MegatronsInterleavedExamples) {
  // megatron/core/transformer/transformer_block.py: 8 layers, 2 stages, 4 model chunks:
  // stage 0: [0] [2] [4] [6], stage 1: [1] [3] [5] [7].
  ParallelConfig p = pipeline(2, 4);
  for (int64_t v = 0; v < 4; ++v) {
    EXPECT_EQ(chunk_layers(8, p, 0, v), (LayerRange{2 * v, 1}));
    EXPECT_EQ(chunk_layers(8, p, 1, v), (LayerRange{2 * v + 1, 1}));
  }
  // 2 model chunks: stage 0: [0, 1] [4, 5], stage 1: [2, 3] [6, 7].
  ParallelConfig q = pipeline(2, 2);
  EXPECT_EQ(stage_chunks(8, q, 0), (std::vector<LayerRange>{{0, 2}, {4, 2}}));
  EXPECT_EQ(stage_chunks(8, q, 1), (std::vector<LayerRange>{{2, 2}, {6, 2}}));
}

TEST(LayerRange, EvenSplitWithoutVirtualStages) {
  ParallelConfig p = pipeline(4, 1);
  for (int64_t r = 0; r < 4; ++r) {
    EXPECT_EQ(layers_on_stage(24, p, r), 6);
    EXPECT_EQ(chunk_layers(24, p, r, 0), (LayerRange{6 * r, 6}));
  }
}

TEST(LayerRange, UnevenFirstAndLast) {
  // 30 layers, pp 4, first 6, last 6: the middle two stages take 9 each.
  ParallelConfig p = pipeline(4, 1);
  p.decoder_first_pipeline_num_layers = 6;
  p.decoder_last_pipeline_num_layers = 6;
  EXPECT_EQ(chunk_layers(30, p, 0, 0), (LayerRange{0, 6}));
  EXPECT_EQ(chunk_layers(30, p, 1, 0), (LayerRange{6, 9}));
  EXPECT_EQ(chunk_layers(30, p, 2, 0), (LayerRange{15, 9}));
  EXPECT_EQ(chunk_layers(30, p, 3, 0), (LayerRange{24, 6}));
}

TEST(LayerRange, UnevenLastOnly) {
  // 25 layers, pp 4, last 1: 8 on each of the first three stages.
  ParallelConfig p = pipeline(4, 1);
  p.decoder_last_pipeline_num_layers = 1;
  EXPECT_EQ(chunk_layers(25, p, 0, 0), (LayerRange{0, 8}));
  EXPECT_EQ(chunk_layers(25, p, 2, 0), (LayerRange{16, 8}));
  EXPECT_EQ(chunk_layers(25, p, 3, 0), (LayerRange{24, 1}));
}

TEST(LayerRange, UnevenWithVirtualStages) {
  // 24 layers, pp 4, vpp 2, first 4, last 4: middle stages 8 each. Model chunk index 0 covers
  // layers 0..11 as 2 (stage 0), 4 (stage 1), 4 (stage 2), 2 (stage 3); chunk 1 covers 12..23.
  ParallelConfig p = pipeline(4, 2);
  p.decoder_first_pipeline_num_layers = 4;
  p.decoder_last_pipeline_num_layers = 4;
  EXPECT_EQ(stage_chunks(24, p, 0), (std::vector<LayerRange>{{0, 2}, {12, 2}}));
  EXPECT_EQ(stage_chunks(24, p, 1), (std::vector<LayerRange>{{2, 4}, {14, 4}}));
  EXPECT_EQ(stage_chunks(24, p, 2), (std::vector<LayerRange>{{6, 4}, {18, 4}}));
  EXPECT_EQ(stage_chunks(24, p, 3), (std::vector<LayerRange>{{10, 2}, {22, 2}}));
}

// A pipeline split: layers over pp stages of vpp chunks, first and last stage sizes (0: even).
struct Split {
  int64_t layers = 0, pp = 1, vpp = 1, first = 0, last = 0;
};

// Every split with layers 1..40, pp 1..6, vpp 1..3 and first / last stage sizes 0..8.
std::vector<Split> split_shapes() {
  std::vector<Split> out;
  for (int64_t layers = 1; layers <= 40; ++layers)
    for (int64_t pp = 1; pp <= 6; ++pp)
      for (int64_t vpp = 1; vpp <= 3; ++vpp)
        for (int64_t first = 0; first <= 8; ++first)
          for (int64_t last = 0; last <= 8; ++last) out.push_back({layers, pp, vpp, first, last});
  return out;
}

// Megatron's rules (validate() states them): true for the splits it accepts.
bool megatron_accepts(const Split& s) {
  if (s.vpp > 1 && s.pp == 1) return false;
  if (s.first == 0 && s.last == 0) return s.layers % (s.pp * s.vpp) == 0;
  int64_t middle = s.pp - (s.first > 0) - (s.last > 0);
  int64_t rest = s.layers - s.first - s.last;
  return middle >= 0 && rest >= 0 && (rest == 0) == (middle == 0) && s.first % s.vpp == 0 &&
         s.last % s.vpp == 0 &&
         (middle == 0 || (rest % middle == 0 && (rest / middle) % s.vpp == 0));
}

// The chunks of all stages cover every layer exactly once, and each stage's chunks add up to
// layers_on_stage().
void expect_partition(const Split& s) {
  ParallelConfig p = pipeline(s.pp, s.vpp);
  if (s.first > 0) p.decoder_first_pipeline_num_layers = s.first;
  if (s.last > 0) p.decoder_last_pipeline_num_layers = s.last;
  std::vector<int> owner(static_cast<size_t>(s.layers), 0);
  for (int64_t r = 0; r < s.pp; ++r) {
    int64_t on_stage = 0;
    for (const LayerRange& c : stage_chunks(s.layers, p, r)) {
      on_stage += c.count;
      for (int64_t i = c.first; i < c.first + c.count; ++i) {
        ASSERT_GE(i, 0);
        ASSERT_LT(i, s.layers);
        ++owner[static_cast<size_t>(i)];
      }
    }
    EXPECT_EQ(on_stage, layers_on_stage(s.layers, p, r));
  }
  for (int64_t i = 0; i < s.layers; ++i)
    ASSERT_EQ(owner[static_cast<size_t>(i)], 1)
        << "layer " << i << " of " << s.layers << ", pp " << s.pp << ", vpp " << s.vpp << ", first "
        << s.first << ", last " << s.last;
}

TEST(LayerRange, EveryValidSplitPartitionsTheLayers) {
  int checked = 0;
  for (const Split& s : split_shapes()) {
    if (!megatron_accepts(s)) continue;
    expect_partition(s);
    ++checked;
  }
  EXPECT_GT(checked, 500);
}

// --pipeline-model-parallel-layout: Megatron's functional test "Et*3|(tt|)*6L" at pp 2 (15
// layers, vpp 4): stage 0 holds chunks 0 (E + 3), 2, 4, 6; stage 1 chunks 1, 3, 5, 7 (2 + L).
TEST(LayerRange, LayoutGivesEachChunkItsLayers) {
  ParallelConfig p = pipeline(2, 4);
  p.pipeline_model_parallel_layout = parse_pipeline_layout("Et*3|(tt|)*6L", "layout");
  EXPECT_EQ(stage_chunks(15, p, 0), (std::vector<LayerRange>{{0, 3}, {5, 2}, {9, 2}, {13, 2}}));
  EXPECT_EQ(stage_chunks(15, p, 1), (std::vector<LayerRange>{{3, 2}, {7, 2}, {11, 2}, {15, 0}}));
  EXPECT_EQ(layers_on_stage(15, p, 0), 9);
  EXPECT_EQ(layers_on_stage(15, p, 1), 6);
}

// Layer counts that pp does not divide: BLOOM's 70 layers on 12 stages, Llama 3.1 405B's 126 on
// 16 (and with an embedding-only first stage), Qwen3-235B's 94 on 8.
TEST(LayerRange, LayoutsOfLayerCountsThatDoNotDivide) {
  ParallelConfig p = pipeline(12, 1);
  p.pipeline_model_parallel_layout = parse_pipeline_layout("Et*5|(t*6|)*10t*5L", "layout");
  EXPECT_EQ(chunk_layers(70, p, 0, 0), (LayerRange{0, 5}));
  EXPECT_EQ(chunk_layers(70, p, 1, 0), (LayerRange{5, 6}));
  EXPECT_EQ(chunk_layers(70, p, 11, 0), (LayerRange{65, 5}));
  ParallelConfig q = pipeline(16, 1);
  q.pipeline_model_parallel_layout = parse_pipeline_layout("E|(t*9|)*14t*0L", "layout");
  EXPECT_EQ(chunk_layers(126, q, 0, 0), (LayerRange{0, 0}));
  EXPECT_EQ(chunk_layers(126, q, 14, 0), (LayerRange{117, 9}));
  EXPECT_EQ(chunk_layers(126, q, 15, 0), (LayerRange{126, 0}));
  ParallelConfig r = pipeline(8, 1);
  r.pipeline_model_parallel_layout = layout_from_counts({11, 12, 12, 12, 12, 12, 12, 11});
  EXPECT_EQ(chunk_layers(94, r, 7, 0), (LayerRange{83, 11}));
}

// account_for_embedding/loss_in_pipeline_split: Megatron's functional test
// gpt3_mcore_te_tp1_pp4_vp2_account_for_embedding_loss_in_pipeline_split: 6 layers + embedding +
// loss = 8 on 4 stages x 2 chunks, one each; the embedding's and the loss's chunks build none.
TEST(LayerRange, AccountForEmbeddingAndLoss) {
  ParallelConfig p = pipeline(4, 2);
  p.account_for_embedding_in_pipeline_split = true;
  p.account_for_loss_in_pipeline_split = true;
  EXPECT_EQ(stage_chunks(6, p, 0), (std::vector<LayerRange>{{0, 0}, {3, 1}}));
  EXPECT_EQ(stage_chunks(6, p, 1), (std::vector<LayerRange>{{0, 1}, {4, 1}}));
  EXPECT_EQ(stage_chunks(6, p, 2), (std::vector<LayerRange>{{1, 1}, {5, 1}}));
  EXPECT_EQ(stage_chunks(6, p, 3), (std::vector<LayerRange>{{2, 1}, {6, 0}}));
  // Llama 3.1 405B at pp 16 (Megatron-Bridge's recipe): 126 + 2 = 128, 8 per stage; the first
  // and last stage build 7.
  ParallelConfig q = pipeline(16, 1);
  q.account_for_embedding_in_pipeline_split = true;
  q.account_for_loss_in_pipeline_split = true;
  EXPECT_EQ(chunk_layers(126, q, 0, 0), (LayerRange{0, 7}));
  EXPECT_EQ(chunk_layers(126, q, 1, 0), (LayerRange{7, 8}));
  EXPECT_EQ(chunk_layers(126, q, 15, 0), (LayerRange{119, 7}));
  ParallelConfig e = pipeline(4, 1);  // embedding only: 7 + 1 = 8 -> 1, 2, 2, 2
  e.account_for_embedding_in_pipeline_split = true;
  EXPECT_EQ(chunk_layers(7, e, 0, 0), (LayerRange{0, 1}));
  EXPECT_EQ(chunk_layers(7, e, 3, 0), (LayerRange{5, 2}));
}

// How many chunks of all stages hold each of `layers` layers.
std::vector<int> owners(int64_t layers, const ParallelConfig& p) {
  std::vector<int> owner(static_cast<size_t>(layers), 0);
  for (int64_t r = 0; r < p.pp; ++r)
    for (const LayerRange& c : stage_chunks(layers, p, r))
      for (int64_t i = c.first; i < c.first + c.count; ++i) ++owner[static_cast<size_t>(i)];
  return owner;
}

// Every layout of `counts` layers per stage on each pp that divides the stage count partitions
// the layers; returns how many it checked.
int check_layouts_of(const std::vector<int64_t>& counts) {
  int64_t layers = 0;
  for (int64_t n : counts) layers += n;
  const auto stages = static_cast<int64_t>(counts.size());
  int checked = 0;
  for (int64_t pp = 1; pp <= 3 && layers > 0; ++pp) {
    if (stages % pp != 0) continue;
    ParallelConfig p = pipeline(pp, stages / pp);
    p.pipeline_model_parallel_layout = layout_from_counts(counts);
    EXPECT_EQ(owners(layers, p), std::vector<int>(static_cast<size_t>(layers), 1))
        << p.pipeline_model_parallel_layout->text << " at pp " << pp;
    ++checked;
  }
  return checked;
}

// Every layout of up to 6 stages of up to 3 layers each (pp 1..3 dividing the stage count)
// partitions the layers.
TEST(LayerRange, EveryLayoutPartitionsTheLayers) {
  int checked = 0;
  for (int64_t stages = 1; stages <= 6; ++stages) {
    std::vector<int64_t> counts(static_cast<size_t>(stages), 0);
    for (size_t k = 0; k < counts.size();) {  // counts in base 4, the first digit fastest
      checked += check_layouts_of(counts);
      for (k = 0; k < counts.size() && ++counts[k] == 4; ++k) counts[k] = 0;
    }
  }
  EXPECT_GT(checked, 4000);
}

// Every account_for split Megatron accepts (layers 1..30, pp 1..6, vpp 1..3) partitions the
// layers.
TEST(LayerRange, EveryAccountForSplitPartitionsTheLayers) {
  int checked = 0;
  for (int64_t layers = 1; layers <= 30; ++layers)
    for (int64_t pp = 1; pp <= 6; ++pp)
      for (int64_t vpp = 1; vpp <= 3; ++vpp)
        for (int ends = 1; ends <= 3; ++ends) {
          const int64_t total = layers + (ends & 1) + (ends >> 1);
          if ((vpp > 1 && pp == 1) || total % pp != 0 || (total / pp) % vpp != 0) continue;
          ParallelConfig p = pipeline(pp, vpp);
          p.account_for_embedding_in_pipeline_split = (ends & 1) != 0;
          p.account_for_loss_in_pipeline_split = (ends & 2) != 0;
          EXPECT_EQ(owners(layers, p), std::vector<int>(static_cast<size_t>(layers), 1))
              << layers << " layers, pp " << pp << ", vpp " << vpp << ", ends " << ends;
          ++checked;
        }
  EXPECT_GT(checked, 200);
}

TEST(LayerRange, InvalidSplitIsABrokenInvariant) {
  EXPECT_THROW(layers_on_stage(10, pipeline(4, 1), 0), InternalError);
  EXPECT_THROW(chunk_layers(8, pipeline(2, 2), 2, 0), InternalError);
}

}  // namespace
}  // namespace mplan
