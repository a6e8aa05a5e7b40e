// Shapes of the calibration: the linear layers' GEMMs as sim/plan_sim/layer_costs.cpp lowers them
// (column-parallel qkv and fc1: fwd (T, out/t, h), dx (T, h, out/t), dw (out/t, h, T); row-parallel
// proj and fc2: fwd (T, h, in/t; at t = 1 with the residual add in its epilogue, as the executor
// runs it), dx (T, in/t, h), dw (in/t, h, T), GeLU's fc2 dx with the
// GeLU-backward epilogue; the output layer as a column-parallel linear over the padded vocabulary)
// and the attention shards.
#include "exec/calibrate/calibration_shapes.hpp"

#include <algorithm>

#include "sim/plan_sim/layer_costs.hpp"
#include "src/common/error.hpp"
#include "src/plan/plan.hpp"

namespace mplan::exec::calibrate {
namespace {

bool divides(const ModelSpec& m, int64_t tp) {
  return tp >= 1 && m.num_attention_heads % tp == 0 && m.num_query_groups % tp == 0 &&
         m.ffn_hidden_size % tp == 0;
}

sim::PlanDims dims_of(const ModelSpec& model, int64_t mbs, int64_t tp) {
  Plan plan;
  plan.model = model;
  plan.parallel.tp = tp;
  plan.parallel.micro_batch_size = mbs;
  plan.parallel.global_batch_size = mbs;
  return sim::plan_dims(plan, sim::SimOptions{});
}

template <class T>
void push_unique(std::vector<T>& v, const T& x) {
  if (std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
}

}  // namespace

std::vector<GemmShape> linear_gemm_shapes(const ModelSpec& model, int64_t mbs, int64_t tp) {
  if (mbs < 1) throw Error(cat("micro-batch size must be >= 1, got ", mbs));
  if (!divides(model, tp))
    throw Error(
        cat("tp ", tp, " does not divide the heads, query groups and FFN width of ", model.name));
  const sim::PlanDims d = dims_of(model, mbs, tp);
  const bool bias = d.bias;
  std::vector<GemmShape> out;
  auto column = [&](const char* layer, int64_t width, const char* fwd_kind, bool has_bias) {
    out.push_back({d.tokens, width, d.h, fwd_kind, layer, has_bias});
    out.push_back({d.tokens, d.h, width, "dx", layer, false});
    out.push_back({width, d.h, d.tokens, "dw", layer, false});
  };
  auto row = [&](const char* layer, int64_t width, const char* dx_kind) {
    out.push_back({d.tokens, d.h, width, "fwd", layer, bias, d.t == 1});
    out.push_back({d.tokens, width, d.h, dx_kind, layer, false});
    out.push_back({width, d.h, d.tokens, "dw", layer, false});
  };
  column("qkv", d.q_w + 2 * d.kv_w, "fwd", bias);
  row("proj", d.q_w, "dx");
  const int64_t f_t = d.ffn / d.t;
  const bool gelu = d.gate == 1;
  column("fc1", d.gate * f_t, gelu && bias ? "fwd_gelu" : "fwd", bias);
  row("fc2", f_t, gelu ? "dx_dgelu" : "dx");
  column("logits", d.vocab / d.t, "fwd", false);
  return out;
}

std::vector<GemmShape> gemm_shapes_for(const std::vector<ModelSpec>& models,
                                       const std::vector<int64_t>& mbs,
                                       const std::vector<int64_t>& tp) {
  std::vector<GemmShape> out;
  for (const ModelSpec& m : models)
    for (int64_t t : tp) {
      if (!divides(m, t)) continue;
      for (int64_t b : mbs)
        for (const GemmShape& g : linear_gemm_shapes(m, b, t)) push_unique(out, g);
    }
  return out;
}

std::vector<AttentionShape> attention_shapes_for(const std::vector<ModelSpec>& models,
                                                 const std::vector<int64_t>& mbs,
                                                 const std::vector<int64_t>& tp,
                                                 const std::vector<int64_t>& batches,
                                                 const std::vector<int64_t>& heads,
                                                 const std::vector<int64_t>& seqs,
                                                 const std::vector<int64_t>& head_dims) {
  auto ok = [](int64_t d) { return d >= 8 && d <= 128 && d % 8 == 0; };
  std::vector<AttentionShape> out;
  for (const ModelSpec& m : models)
    for (int64_t t : tp) {
      if (!divides(m, t) || !ok(m.kv_channels)) continue;
      for (int64_t b : mbs)
        push_unique(out, {b, m.num_attention_heads / t, m.seq_length, m.kv_channels});
    }
  for (int64_t b : batches)
    for (int64_t a : heads)
      for (int64_t s : seqs)
        for (int64_t d : head_dims)
          if (ok(d)) push_unique(out, {b, a, s, d});
  return out;
}

CalibrationSettings calibration_settings(bool quick, const std::vector<ModelSpec>& models) {
  if (models.empty()) throw Error("--model: at least one model is needed for the GEMM shapes");
  CalibrationSettings s;
  s.quick = quick;
  s.mbs = quick ? std::vector<int64_t>{1, 4} : std::vector<int64_t>{1, 2, 4, 8};
  s.tp = quick ? std::vector<int64_t>{1, 2} : std::vector<int64_t>{1, 2, 4, 8};
  s.gemms = gemm_shapes_for(models, s.mbs, s.tp);
  // Square GEMMs fill the curve between and beyond the models' shapes.
  const std::vector<int64_t> squares =
      quick ? std::vector<int64_t>{1024, 2048, 4096, 8192}
            : std::vector<int64_t>{512, 1024, 2048, 4096, 8192, 16384};
  for (int64_t n : squares) push_unique(s.gemms, GemmShape{n, n, n, "fwd", "square", false});
  if (quick)
    s.attention = attention_shapes_for(models, s.mbs, s.tp, {1, 4}, {16}, {1024, 4096}, {128});
  else
    s.attention = attention_shapes_for(models, s.mbs, s.tp, {1, 2, 4}, {8, 16, 32},
                                       {1024, 2048, 4096, 8192}, {64, 128});
  s.memory_rows =
      quick ? std::vector<int64_t>{2048, 16384} : std::vector<int64_t>{512, 2048, 8192, 32768};
  for (const ModelSpec& m : models)
    if (m.hidden_size != 4096) push_unique(s.memory_widths, m.hidden_size);
  const double MiB = 1 << 20;
  s.nccl_bytes = quick ? std::vector<double>{8, MiB, 16 * MiB, 256 * MiB}
                       : std::vector<double>{8,        64 * 1024, MiB,       4 * MiB,
                                             16 * MiB, 64 * MiB,  256 * MiB, 1024 * MiB};
  s.reps = quick ? 5 : 7;
  s.sustained_seconds = quick ? 3 : 10;
  return s;
}

void add_plan_shapes(CalibrationSettings& s, const ModelSpec& model, int64_t mbs, int64_t tp) {
  if (model.hidden_size != 4096) push_unique(s.memory_widths, model.hidden_size);
  for (const GemmShape& g : linear_gemm_shapes(model, mbs, tp)) push_unique(s.gemms, g);
  for (const AttentionShape& a : attention_shapes_for({model}, {mbs}, {tp}, {}, {}, {}, {}))
    push_unique(s.attention, a);
}

}  // namespace mplan::exec::calibrate
