// CalibrationShapes: what `mplan calibrate` times, derived from models the way the simulator
// lowers them (sim/plan_sim/layer_costs: plan_dims gives the per-GPU widths): the forward,
// input-gradient and weight-gradient GEMMs of every linear layer at each micro-batch size and
// tensor-parallel degree, and the causal attention shapes. Invariant: a GEMM is (m, n, k) exactly
// as layer_costs.cpp passes it to gemm_time_ns, so a measured efficiency keys the same shape.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "src/model/model_spec.hpp"

namespace mplan::exec::calibrate {

// "fwd" (bias epilogue when the model has biases; a row-parallel one at tensor parallel 1 also
// adds the residual, as the executor runs it), "fwd_gelu" (bias + GeLU epilogue: GPT's fc1),
// "dx" (input gradient, bf16 out), "dx_dgelu" (input gradient with the GeLU-backward epilogue:
// GPT's fc2), "dw" (weight gradient, accumulated into f32).
struct GemmShape {
  int64_t m = 0, n = 0, k = 0;
  std::string kind;
  std::string layer;      // "qkv", "proj", "fc1", "fc2", "logits"
  bool bias = false;      // a forward with a bias epilogue
  bool residual = false;  // a forward with the residual add as its epilogue (row-parallel, tp 1)
  double flops() const {
    return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  }
  bool operator==(const GemmShape& o) const {
    return m == o.m && n == o.n && k == o.k && kind == o.kind;
  }
};

// Causal self-attention of one tensor-parallel shard: (batch, heads, seq, head_dim).
struct AttentionShape {
  int64_t batch = 0, heads = 0, seq = 0, head_dim = 0;
  // FLOPs as the FlashAttention benchmarks count them: 4·b·heads·s²·d, halved for causal.
  double forward_flops() const {
    return 2.0 * static_cast<double>(batch) * static_cast<double>(heads) *
           static_cast<double>(seq) * static_cast<double>(seq) * static_cast<double>(head_dim);
  }
  double backward_flops() const { return 2.5 * forward_flops(); }
  bool operator==(const AttentionShape&) const = default;
};

// The linear layers' GEMMs of one model on one GPU at micro-batch `mbs` and tensor parallel `tp`
// (no sequence or context parallelism), in layer order qkv, proj, fc1, fc2, logits; each layer
// fwd (or fwd_gelu), dx (or dx_dgelu), dw. Throws mplan::Error when tp does not divide the
// model's widths.
std::vector<GemmShape> linear_gemm_shapes(const ModelSpec& model, int64_t mbs, int64_t tp);

// The same over every (mbs, tp) pair of the models, without repeats (first occurrence kept).
// tp values that do not divide a model's heads, groups or FFN width are left out for it.
std::vector<GemmShape> gemm_shapes_for(const std::vector<ModelSpec>& models,
                                       const std::vector<int64_t>& mbs,
                                       const std::vector<int64_t>& tp);

// The attention shape of each model at each (mbs, tp) (heads = query heads / tp; the executor
// expands grouped K/V to every head), plus a grid of `batches` × `heads` × `seqs` × `head_dims`,
// without repeats; head dims the CUDA kernels cannot take (> 128 or not a multiple of 8) are
// left out.
std::vector<AttentionShape> attention_shapes_for(const std::vector<ModelSpec>& models,
                                                 const std::vector<int64_t>& mbs,
                                                 const std::vector<int64_t>& tp,
                                                 const std::vector<int64_t>& batches,
                                                 const std::vector<int64_t>& heads,
                                                 const std::vector<int64_t>& seqs,
                                                 const std::vector<int64_t>& head_dims);

// Everything one `mplan calibrate` run measures (quick: fewer shapes, sizes and repeats).
struct CalibrationSettings {
  bool quick = false;
  std::vector<int64_t> mbs, tp;  // the micro-batch sizes and tp degrees of the models
  std::vector<GemmShape> gemms;  // the models' linear GEMMs, then square ones
  std::vector<AttentionShape> attention;
  std::vector<int64_t> memory_rows;  // rows of the memory-bound kernels (4096 wide)
  // Widths the row-wise kinds (the norms) are measured at besides 4096: the models' and plans'
  // hidden sizes (a norm's rate depends on its row width, not only on its bytes).
  std::vector<int64_t> memory_widths;
  std::vector<double> nccl_bytes;  // nccl-tests sizes S (the first, 8 bytes, gives α)
  int warmup = 2, reps = 7;        // per timed shape
  double sustained_seconds = 10;   // the same GEMM back to back, for the clock under load
  // Milliseconds of a large GEMM run before each GEMM and attention shape is timed, so that it
  // runs at the clock a GEMM-only load holds under the power limit (0: as the timed calls come;
  // docs/cli/calibrate.md says what either predicts).
  double heat_ms = 0;
};
CalibrationSettings calibration_settings(bool quick, const std::vector<ModelSpec>& models);

// Adds a plan's own shapes (its model at its micro-batch size and tp degree) to `s`, without
// repeats: what `mplan calibrate --plan` measures so that the plans checked afterwards are
// costed from their own GEMMs and attention calls.
void add_plan_shapes(CalibrationSettings& s, const ModelSpec& model, int64_t mbs, int64_t tp);

}  // namespace mplan::exec::calibrate
