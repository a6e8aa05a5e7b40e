// ParamLayout: Megatron's parameter order and count per chunk, the shard of each kind on each
// tensor-parallel rank (element by element against hand-derived positions; all ranks' shards tile
// the full tensor exactly once), the buffer laid out in reverse order with Megatron's buckets
// (boundaries worked out by hand), the distributed optimizer's padding and the shared embedding's
// own bucket, initialization that does not depend on the layout (tp or pp), and — the one-owner
// check — every rank's parameter count equal to the simulator's rank_params() for every preset
// over many layouts.
#include "exec/model/param_layout.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>

#include "exec/model/init_rng.hpp"
#include "src/common/embedded_configs.hpp"
#include "src/model/model_stats.hpp"
#include "src/parallel/grad_buckets.hpp"
#include "src/plan/cluster_spec.hpp"
#include "src/plan/plan.hpp"
#include "src/plan/validate.hpp"
#include "tests/src/model/test_gpt.hpp"

namespace mplan::exec {
namespace {

// gpt(layers, hidden, heads, seq, vocab), the vocabulary padded to a multiple of 4.
ModelSpec small_model(int64_t layers = 2) {
  ModelSpec m = test::gpt(layers, 8, 4, 6, 16);
  m.make_vocab_size_divisible_by = 4;
  return m;
}

ParallelConfig layout(int64_t tp, int64_t pp = 1, int64_t vpp = 1) {
  ParallelConfig p;
  p.tp = tp;
  p.pp = pp;
  p.vpp = vpp;
  return p;
}

ParamLayout make(const ModelSpec& m, const ParallelConfig& p, int64_t pp_rank, int64_t tp_rank,
                 int64_t buckets = 0) {
  (void)tp_rank;  // a stage's layout is the same on every tensor-parallel rank
  return make_param_layout(m, p, pp_rank, buckets);
}

TEST(ParamLayout, MegatronOrderAndCount) {
  const ModelSpec m = small_model();
  const ParamLayout p = make(m, layout(1), 0, 0);
  ASSERT_EQ(p.specs.size(), 2u + 12u * 2 + 2);
  EXPECT_EQ(p.specs[0].name, "embedding.word_embeddings.weight");
  EXPECT_EQ(p.specs[1].name, "embedding.position_embeddings.weight");
  EXPECT_EQ(p.specs[2].name, "decoder.layers.0.input_layernorm.weight");
  EXPECT_EQ(p.specs[4].name, "decoder.layers.0.self_attention.linear_proj.weight");
  EXPECT_EQ(p.specs[6].name, "decoder.layers.0.self_attention.linear_qkv.weight");
  EXPECT_EQ(p.specs[13].name, "decoder.layers.0.mlp.linear_fc2.bias");
  EXPECT_EQ(p.specs.back().name, "decoder.final_layernorm.bias");
  int64_t total = 0;
  for (size_t i = 0; i < p.specs.size(); ++i) {
    const ParamSpec& s = p.specs[i];
    total += s.rows * s.cols;
    EXPECT_EQ(s.offset % kParamAlignElems, 0) << s.name;
    EXPECT_EQ(s.weight_decay, s.ndim == 2) << s.name;  // no decay on biases and norms
    EXPECT_EQ(s.model_index, static_cast<int64_t>(i)) << s.name;
  }
  const int64_t h = 8, L = 2, V = 16, S = 6;  // ffn = 4h: 12h² + 13h per layer
  EXPECT_EQ(total, V * h + S * h + L * (12 * h * h + 13 * h) + 2 * h);
  // Tied at pp 1: the output layer is the word embedding.
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].output, p.chunks[0].wte);
}

TEST(ParamLayout, BufferInReverseOrderWithMegatronsBuckets) {
  // gpt(1 layer, h 8, 2 heads, s 4, vocab 64); from the end of the list backwards (each start
  // aligned to 64): lnf b 8 @0, lnf w @64, fc2 b @128, fc2 w 256 @192, fc1 b 32 @448,
  // fc1 w 256 @512, ln2 b @768, ln2 w @832, qkv b 24 @896, qkv w 192 @960, proj b @1152,
  // proj w 64 @1216, ln1 b @1280, ln1 w @1344, wpe 32 @1408, wte 512 @1472; total 1984.
  ModelSpec m = test::gpt(1, 8, 2, 4, 64);
  m.make_vocab_size_divisible_by = 64;
  const ParamLayout p = make(m, layout(1), 0, 0, 500);
  EXPECT_EQ(p.specs.back().offset, 0);  // lnf b
  EXPECT_EQ(p.specs[static_cast<size_t>(p.chunks[0].layers[0].fc1_w)].offset, 512);
  EXPECT_EQ(p.specs[0].offset, 1472);
  EXPECT_EQ(p.total_elems, 1984);
  // Buckets close at >= 500 elements from their start: fc1 w ends at 768 (>= 500): lnf b ..
  // fc1 w; then from 768: qkv w ends at 1152 (384), proj w at 1280 (512): ln2 b .. proj w; then
  // ln1 b, ln1 w, wpe, wte (1984 - 1280 = 704) in the last.
  ASSERT_EQ(p.buckets.size(), 3u);
  EXPECT_EQ(p.buckets[0].offset, 0);
  EXPECT_EQ(p.buckets[0].numel, 768);
  EXPECT_EQ(p.buckets[0].params.size(), 6u);
  EXPECT_EQ(p.buckets[1].offset, 768);
  EXPECT_EQ(p.buckets[1].numel, 512);
  EXPECT_EQ(p.buckets[2].offset, 1280);
  EXPECT_EQ(p.buckets[2].numel, 704);
  EXPECT_EQ(p.buckets[2].params.back(), p.chunks[0].wte);
  // Megatron's rule: one bucket on pipeline ranks after the first, and on later chunks.
  ParallelConfig pp2 = layout(1, 2);
  pp2.overlap_grad_reduce = true;
  EXPECT_GT(grad_bucket_elems(pp2, 0, 0), 0);
  EXPECT_EQ(grad_bucket_elems(pp2, 1, 0), 0);
  EXPECT_EQ(grad_bucket_elems(layout(1, 2, 2), 0, 1), 0);
}

TEST(ParamLayout, DistributedOptimizerPadsBucketsAndIsolatesTheSharedEmbedding) {
  const ModelSpec m = small_model(4);
  ParallelConfig p = layout(1, 2);
  p.dp = 3;
  p.distributed_optimizer = true;
  for (int64_t stage : {0, 1}) {
    const ParamLayout l = make(m, p, stage, 0);
    const int64_t pad = std::lcm<int64_t>(3, 128);
    for (const GradBucket& b : l.buckets) {
      EXPECT_EQ(b.numel % pad, 0);
      EXPECT_EQ(b.offset % pad, 0);
    }
    // The word embedding (stage 0) and its copy (stage 1) alone in a bucket: equal shards.
    const int shared = stage == 0 ? l.chunks[0].wte : l.chunks[0].output;
    ASSERT_TRUE(l.specs[static_cast<size_t>(shared)].shared_embedding);
    EXPECT_EQ(l.specs[static_cast<size_t>(shared)].shared_copy, stage == 1);
    int found = 0;
    for (const GradBucket& b : l.buckets)
      if (std::find(b.params.begin(), b.params.end(), shared) != b.params.end()) {
        EXPECT_EQ(b.params.size(), 1u);
        EXPECT_EQ(b.numel, (16 * 8 + pad - 1) / pad * pad);
        ++found;
      }
    EXPECT_EQ(found, 1);
  }
}

TEST(ParamLayout, ShardsByHeadsInsideEachOfQkvAndTileTheFullTensor) {
  const ModelSpec m = small_model();
  const ParamLayout full = make(m, layout(1), 0, 0);
  for (int64_t tp : {1, 2, 4}) {
    std::vector<std::multiset<int64_t>> seen(full.specs.size());
    for (int64_t r = 0; r < tp; ++r) {
      GptDims d = gpt_dims(m, 1, tp, r, false);
      const ParamLayout p = make(m, layout(tp), 0, r);
      ASSERT_EQ(p.specs.size(), full.specs.size());
      for (size_t i = 0; i < p.specs.size(); ++i)
        for (int64_t j = 0; j < p.specs[i].local_numel(); ++j)
          seen[i].insert(full_index(p.specs[i], d, j));
      if (tp == 2 && r == 1) {
        const ParamSpec& qkv = p.specs[static_cast<size_t>(p.chunks[0].layers[0].qkv_w)];
        ASSERT_EQ(qkv.local_rows, 12);  // (24, 8) full
        // Local rows 0..3 are Q rows 4..7 (heads 2, 3); 4..7 are K rows 12..15; 8..11 V 20..23.
        EXPECT_EQ(full_index(qkv, d, 0), 4 * 8);
        EXPECT_EQ(full_index(qkv, d, 4 * 8 + 3), 12 * 8 + 3);
        EXPECT_EQ(full_index(qkv, d, 11 * 8 + 7), 23 * 8 + 7);
        const ParamSpec& proj = p.specs[static_cast<size_t>(p.chunks[0].layers[0].proj_w)];
        EXPECT_EQ(proj.local_cols, 4);
        EXPECT_EQ(full_index(proj, d, 1 * 4 + 2), 1 * 8 + 4 + 2);  // row 1, column 4 + 2
        EXPECT_EQ(full_index(p.specs[0], d, 0), 8 * 8);            // wte (16, 8): rows 8..15
        const ParamSpec& fc1b = p.specs[static_cast<size_t>(p.chunks[0].layers[0].fc1_b)];
        EXPECT_EQ(full_index(fc1b, d, 0), 16);
        EXPECT_EQ(d.vocab_start(), 8);
      }
    }
    for (size_t i = 0; i < full.specs.size(); ++i) {
      const ParamSpec& s = full.specs[i];
      const int64_t copies = s.shard == ShardKind::kReplicated ? tp : 1;
      ASSERT_EQ(static_cast<int64_t>(seen[i].size()), s.rows * s.cols * copies) << s.name;
      for (int64_t e = 0; e < s.rows * s.cols; ++e)
        ASSERT_EQ(static_cast<int64_t>(seen[i].count(e)), copies) << s.name << " element " << e;
    }
  }
}

TEST(ParamLayout, InitIsMegatronsAndLayoutIndependent) {
  const ModelSpec m = small_model(4);
  const GptDims d1 = gpt_dims(m, 1, 1, 0, false);
  const ParamLayout ref = make(m, layout(1), 0, 0);
  std::map<std::string, std::vector<float>> want;
  for (const ParamSpec& s : ref.specs) {
    std::vector<float> v(static_cast<size_t>(s.local_numel()));
    init_param_shard(s, d1, 5, 0.02, 0, s.local_numel(), v.data());
    want[s.name] = v;
  }
  // Every rank of tp 2 x pp 2 x vpp 2 holds exactly the reference's values.
  const ParallelConfig p = layout(2, 2, 2);
  int checked = 0;
  for (int64_t stage : {0, 1})
    for (int64_t r : {0, 1}) {
      const GptDims d = gpt_dims(m, 1, 2, r, false);
      for (const ParamSpec& s : make(m, p, stage, r).specs) {
        const std::string key = s.shared_copy ? "embedding.word_embeddings.weight" : s.name;
        ASSERT_TRUE(want.count(key)) << s.name;
        std::vector<float> v(static_cast<size_t>(s.local_numel()));
        init_param_shard(s, d, 5, 0.02, 0, s.local_numel(), v.data());
        for (int64_t j = 0; j < s.local_numel(); ++j)
          ASSERT_EQ(v[static_cast<size_t>(j)], want[key][static_cast<size_t>(full_index(s, d, j))])
              << s.name;
        ++checked;
      }
    }
  EXPECT_EQ(checked, 2 * (static_cast<int>(ref.specs.size()) + 1));  // + the shared copy
  // Output projections: std / sqrt(2 L) = 0.02 / sqrt(8); element 0 is that times the normal.
  const ParamSpec& proj = ref.specs[static_cast<size_t>(ref.chunks[0].layers[1].proj_w)];
  float v = 0;
  init_param_shard(proj, d1, 5, 0.02, 0, 1, &v);
  EXPECT_FLOAT_EQ(v,
                  static_cast<float>(0.02 / std::sqrt(8.0) *
                                     init_normal(5, static_cast<uint64_t>(proj.model_index), 0)));
  EXPECT_EQ(proj.init, InitKind::kScaledNormal);
}

TEST(ParamLayout, SequenceParallelReducedAndDuplicatedFlags) {
  ParallelConfig p = layout(2);
  p.sequence_parallel = true;
  const ParamLayout l = make(small_model(), p, 0, 0);
  std::set<std::string> sp;
  for (const auto& s : l.specs)
    if (s.sp_grad_reduce) sp.insert(s.name);
  // Megatron marks norms and row-parallel biases (added after the reduce-scatter).
  EXPECT_EQ(sp.size(), 2u * 6 + 2);
  EXPECT_TRUE(sp.count("decoder.layers.1.mlp.linear_fc2.bias"));
  EXPECT_TRUE(sp.count("decoder.layers.0.self_attention.linear_proj.bias"));
  EXPECT_FALSE(sp.count("decoder.layers.0.self_attention.linear_qkv.bias"));
  EXPECT_FALSE(sp.count("embedding.position_embeddings.weight"));
  EXPECT_TRUE(l.specs[1].tp_duplicated);   // position embedding
  EXPECT_FALSE(l.specs[0].tp_duplicated);  // vocab-parallel
}

TEST(ParamLayout, ChunksHoldTheirLayerRanges) {
  // 8 layers, pp 2, vpp 2: rank 0 holds layers 0-1 (chunk 0) and 4-5 (chunk 1).
  const ParamLayout l = make(small_model(8), layout(1, 2, 2), 0, 0);
  ASSERT_EQ(l.chunks.size(), 2u);
  EXPECT_EQ(l.chunks[0].first_layer, 0);
  EXPECT_EQ(l.chunks[1].first_layer, 4);
  EXPECT_TRUE(l.chunks[0].has_embedding);
  EXPECT_FALSE(l.chunks[1].has_output);
  EXPECT_EQ(l.specs[static_cast<size_t>(l.chunks[1].layers[0].qkv_w)].name,
            "decoder.layers.4.self_attention.linear_qkv.weight");
  EXPECT_EQ(l.chunks[0].end, l.chunks[1].begin);
  const ParamLayout last = make(small_model(8), layout(1, 2, 2), 1, 0);
  EXPECT_TRUE(last.chunks[1].has_output);
  EXPECT_EQ(last.chunks[1].first_layer, 6);
  EXPECT_EQ(last.specs[static_cast<size_t>(last.chunks[1].output)].name, "output_layer.weight");
}

// The executor's parameters per rank equal the simulator's count (src/model/model_stats'
// rank_params, which the simulator's lowering also equals) for every dense preset, and the
// tensor lists add up to it for every preset, over tp x pp x vpp layouts with uneven splits.
TEST(ParamLayout, EveryRankHoldsWhatTheSimulatorCounts) {
  int layouts = 0;
  for (const std::string& name : preset_names("models")) {
    const ModelSpec m = load_model(name);
    if (m.mla || m.mtp_num_layers > 0) continue;  // not run by the executor (check_executable)
    for (int64_t tp : {1, 2, 4, 8})
      for (int64_t pp : {1, 2, 4, 8})
        for (int64_t vpp : {1, 2, 3})
          for (int uneven : {0, 1}) {
            Plan plan;
            plan.model = m;
            plan.cluster = load_cluster("dgx-h100");
            plan.parallel = layout(tp, pp, vpp);
            plan.parallel.dp = 1;
            plan.parallel.global_batch_size = 64;
            plan.parallel.ep = m.moe ? std::min<int64_t>(m.moe->num_experts, 8 / tp) : 1;
            plan.parallel.etp = plan.parallel.tp;
            plan.parallel.dp = std::max<int64_t>(plan.parallel.ep, 1);
            plan.parallel.global_batch_size = 64 * plan.parallel.dp;
            if (vpp > 1) plan.parallel.schedule = ScheduleKind::kInterleaved;
            if (uneven && pp > 1 && vpp == 1) {
              plan.parallel.decoder_first_pipeline_num_layers = m.num_layers / pp - 1;
              plan.parallel.decoder_last_pipeline_num_layers = m.num_layers / pp - 1;
            }
            if (!validate(plan).empty()) continue;
            for (int64_t stage = 0; stage < pp; ++stage) {
              const int64_t want = rank_params(m, plan.parallel, stage).total();
              int64_t tensors = 0;
              for (int64_t c = 0; c < vpp; ++c)
                for (const ParamTensor& t : chunk_tensors(m, plan.parallel, stage, c))
                  tensors += t.local_numel();
              ASSERT_EQ(tensors, want) << name << " tp " << tp << " pp " << pp << " vpp " << vpp;
              if (m.moe) continue;  // the executor runs dense models only
              const ParamLayout l = make_param_layout(m, plan.parallel, stage);
              int64_t held = 0;
              for (const ParamSpec& s : l.specs) held += s.local_numel();
              ASSERT_EQ(held, want) << name << " tp " << tp << " pp " << pp << " vpp " << vpp;
            }
            ++layouts;
          }
  }
  EXPECT_GT(layouts, 300);
}

}  // namespace
}  // namespace mplan::exec
