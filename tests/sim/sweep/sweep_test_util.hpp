// Shared inputs of the sweep tests: a tiny model whose search space is counted by hand in
// candidate_space_test.cpp, requests on the 4-GPU h200x4 node, and a fake simulator with
// simple closed-form figures (so enumeration, ranking and outputs are tested without depending
// on the simulator's numbers).
#pragma once

#include <string>

#include "sim/sweep/memory_bound.hpp"
#include "sim/sweep/sweep.hpp"
#include "src/common/json_reader.hpp"
#include "src/model/model_spec.hpp"
#include "src/plan/cluster_spec.hpp"

namespace mplan::sweep::testing {

// 6 layers, 6 heads (tp 4 cannot divide them), sequence 24, vocabulary 128.
inline ModelSpec tiny_model() {
  return model_from_json(parse_json(R"({"name": "tiny", "num_layers": 6, "hidden_size": 96,
      "num_attention_heads": 6, "ffn_hidden_size": 384, "vocab_size": 128, "seq_length": 24,
      "activation": "gelu", "normalization": "layernorm", "position_embedding": "learned",
      "tied_embeddings": true})",
                                    "tiny"),
                         "model");
}

// The tiny model on `gpus` GPUs of the h200x4 node with global batch `gbs`.
inline SweepRequest tiny_request(int64_t gpus = 4, int64_t gbs = 8) {
  SweepRequest r;
  r.base.model = tiny_model();
  r.base.cluster = load_cluster("h200x4");
  r.gpus = gpus;
  r.global_batch_size = gbs;
  return r;
}

// Figures from a closed form: time = 1 + pp/M + 0.1 tp + 0.05 (full recompute) seconds (so ties
// appear: sp and dist-opt do not change it), peak = the lower bound + 1 GiB per micro-batch
// in flight of pp, minus 1 GiB with sp. Fits when peak <= capacity.
inline sim::SimulationResult fake_simulate(const Plan& plan) {
  const ParallelConfig& p = plan.parallel;
  const double m = static_cast<double>(p.global_batch_size / (p.micro_batch_size * p.dp));
  sim::SimulationResult r;
  r.iteration_time_s = 1.0 + static_cast<double>(p.pp) / m + 0.1 * static_cast<double>(p.tp) +
                       (p.recompute == Recompute::kFull ? 0.05 : 0.0);
  r.tokens_per_s =
      static_cast<double>(p.global_batch_size * plan.model.seq_length) / r.iteration_time_s;
  r.model_tflops_per_gpu = 1.0 / r.iteration_time_s;
  r.mfu = r.model_tflops_per_gpu / plan.cluster.gpu.peak_bf16_tflops;
  r.bubble_fraction = 0.01 * static_cast<double>(p.pp - 1);
  r.breakdown.compute_s = r.iteration_time_s;
  const int64_t gib = int64_t{1} << 30;
  r.peak_bytes = memory_lower_bound(plan) + gib * std::min<int64_t>(p.pp, static_cast<int64_t>(m)) -
                 (p.sequence_parallel ? gib / 2 : 0);
  r.capacity_bytes = plan.cluster.gpu.memory_bytes();
  r.fits = r.peak_bytes <= r.capacity_bytes;
  r.per_stage.resize(static_cast<size_t>(p.pp));
  for (int64_t s = 0; s < p.pp; ++s) {
    r.per_stage[static_cast<size_t>(s)].pp_rank = s;
    r.per_stage[static_cast<size_t>(s)].peak_bytes = r.peak_bytes;
  }
  return r;
}

}  // namespace mplan::sweep::testing
