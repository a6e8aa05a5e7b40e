// Plans for the simulator tests: a "toy" cluster whose GPU computes GEMMs at a flat 50 % and
// attention at a flat 25 % of 1 PFLOP/s, with memory traffic and communication that cost nothing,
// so that every time is the FLOPs of a few GEMMs worked out by hand; and small GPT plans.
#pragma once

#include "src/plan/plan.hpp"
#include "tests/src/model/test_gpt.hpp"

namespace mplan::sim::testing {

inline constexpr double kToyPeakFlops = 1e15;  // peak_bf16_tflops = 1000
inline constexpr double kToyGemmEff = 0.5;
inline constexpr double kToyAttnEff = 0.25;

inline ClusterSpec toy_cluster(int64_t gpus_per_node = 8) {
  ClusterSpec c;
  c.name = "toy";
  c.gpus_per_node = gpus_per_node;
  c.gpu.name = "toy";
  c.gpu.memory_gib = 80;
  c.gpu.peak_bf16_tflops = 1000;
  c.gpu.hbm_bandwidth_gbps = 1e15;  // memory-bound work rounds to 0 ns
  c.gpu.memory_bound_efficiency = 1.0;
  c.gpu.gemm_efficiency = {{1.0, kToyGemmEff}};
  c.gpu.attention_efficiency = {{1.0, kToyAttnEff}};
  c.gpu.attention_backward_efficiency = {{1.0, kToyAttnEff}};
  c.gpu.runtime_overhead_gib = 0;
  LinkSpec free_link;
  free_link.name = "free";
  free_link.latency_us = 0;
  free_link.allreduce_busbw_gbps = {{1.0, 1e15}};
  c.intra_node = free_link;
  c.inter_node = free_link;
  return c;
}

// A GPT with learned positions, LayerNorm, GeLU, ffn 4h: gpt(layers, hidden, heads, seq, vocab).
using ::mplan::test::gpt;

inline Plan plan(const ModelSpec& m, const ClusterSpec& c, int64_t tp, int64_t pp, int64_t dp,
                 int64_t mb, int64_t gbs) {
  Plan p;
  p.model = m;
  p.cluster = c;
  p.parallel.tp = tp;
  p.parallel.etp = tp;
  p.parallel.pp = pp;
  p.parallel.dp = dp;
  p.parallel.micro_batch_size = mb;
  p.parallel.global_batch_size = gbs;
  return p;
}

}  // namespace mplan::sim::testing
