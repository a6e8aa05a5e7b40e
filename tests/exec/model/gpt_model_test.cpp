// GptModel (one rank, CPU backend) against the independent oracle: golden.json, written by
// tests/exec/oracle/make_golden.py with PyTorch in float64 (logits, loss, every gradient, the
// gradient norm and three AdamW steps with clipping). f32 activations are held to tight
// tolerances, bf16 to loose ones. No torch is needed here: only the committed JSON.
#include "exec/model/gpt_model.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "exec/cpu/cpu_backend.hpp"
#include "exec/parallel/optimizer.hpp"
#include "tests/exec/support/test_tensors.hpp"

namespace mplan::exec {
namespace {

using testing::all_close;
using testing::read;

nlohmann::json load_golden() {
  std::ifstream f(MPLAN_EXEC_GOLDEN);
  EXPECT_TRUE(f.good()) << "cannot read " << MPLAN_EXEC_GOLDEN;
  return nlohmann::json::parse(f);
}

ModelSpec golden_model(const nlohmann::json& c) {
  ModelSpec m;
  m.name = "golden";
  m.num_layers = c["layers"];
  m.hidden_size = c["hidden"];
  m.num_attention_heads = c["heads"];
  m.num_query_groups = m.num_attention_heads;
  m.kv_channels = m.hidden_size / m.num_attention_heads;
  m.ffn_hidden_size = c["ffn"];
  m.vocab_size = c["vocab"];
  m.make_vocab_size_divisible_by = m.vocab_size;  // no padding, as in the oracle
  m.seq_length = c["seq"];
  m.max_position_embeddings = c["max_positions"];
  return m;
}

double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::abs(x));
  return m;
}

struct Tolerance {
  double logits_rtol, loss_rtol, grad_rel, norm_rtol;
};

void run_golden(DType act, const Tolerance& tol) {
  nlohmann::json g = load_golden();
  const auto& c = g["config"];
  GptDims d = gpt_dims(golden_model(c), c["micro_batch"], 1, 0, false);
  CpuBackend be;
  testing::SoloComm solo;
  GptModel model(d, act, be, solo, solo, g["seed"].get<uint64_t>(), g["init_method_std"], 0);
  const auto& o = g["optimizer"];
  OptimizerConfig oc{o["lr"], o["beta1"], o["beta2"], o["eps"], o["weight_decay"], o["clip_grad"]};
  Optimizer opt(model.params(), 0, model.master(), model.weights(), model.grads(), be, oc);
  const int64_t T = d.tokens();
  Tensor tok = be.alloc(DType::kI32, {d.seq, d.micro_batch}, "t");
  Tensor tgt = be.alloc(DType::kI32, {d.seq, d.micro_batch}, "t");
  Tensor scalars = be.alloc(DType::kF32, {2}, "t");
  int64_t step = 0;
  for (const auto& s : g["steps"]) {
    SCOPED_TRACE(::testing::Message() << "step " << step);
    std::vector<int32_t> in = s["inputs"], out = s["targets"];
    ASSERT_EQ(static_cast<int64_t>(in.size()), T);
    be.upload(tok, in.data());
    be.upload(tgt, out.data());
    be.fill(scalars, 0.0f);
    model.zero_grads();
    model.forward(tok);
    if (step == 0) {
      std::vector<double> want = s["logits"];
      EXPECT_TRUE(all_close(read(be, model.logits()), want, tol.logits_rtol,
                            tol.logits_rtol * max_abs(want)));
    }
    model.backward(tok, tgt, 1.0f / static_cast<float>(T), true, scalars.flat_slice(0, 1));
    model.finish_grads();
    opt.grad_sum_squares(scalars.flat_slice(1, 1));
    auto sc = read(be, scalars);
    EXPECT_NEAR(sc[0] / T, s["loss"].get<double>(), tol.loss_rtol * s["loss"].get<double>());
    double norm = std::sqrt(static_cast<double>(sc[1]));
    EXPECT_NEAR(norm, s["grad_norm"].get<double>(), tol.norm_rtol * s["grad_norm"].get<double>());
    if (step == 0) {
      const auto& grads = s["grads"];
      int checked = 0;
      for (size_t i = 0; i < model.params().specs.size(); ++i) {
        const ParamSpec& p = model.params().specs[i];
        SCOPED_TRACE(p.name);
        ASSERT_TRUE(grads.contains(p.name));
        std::vector<double> want = grads[p.name];
        double scale = std::max(max_abs(want), 1e-6);
        EXPECT_TRUE(all_close(read(be, model.grad(static_cast<int>(i))), want, tol.grad_rel,
                              tol.grad_rel * scale));
        ++checked;
      }
      EXPECT_EQ(checked, static_cast<int>(grads.size()));
    }
    opt.step(++step, opt.clip_coefficient(norm));
  }
  EXPECT_EQ(step, 3);
}

TEST(GptModelGolden, F32MatchesTorchFloat64) { run_golden(DType::kF32, {1e-4, 1e-5, 1e-4, 1e-5}); }

TEST(GptModelGolden, Bf16MatchesTorchFloat64Loosely) {
  run_golden(DType::kBF16, {2e-2, 2e-3, 6e-2, 2e-2});
}

TEST(GptModel, AllocatesEverythingUpFront) {
  // One micro-batch of activations is preallocated: forward/backward allocate nothing more.
  nlohmann::json g = load_golden();
  GptDims d = gpt_dims(golden_model(g["config"]), 2, 1, 0, false);
  CpuBackend be;
  testing::SoloComm solo;
  GptModel model(d, DType::kBF16, be, solo, solo, 1, 0.02, 0);
  Tensor tok = be.alloc(DType::kI32, {d.seq, d.micro_batch}, "t");
  be.fill(tok, 3.0f);
  Tensor loss = be.alloc(DType::kF32, {1}, "t");
  be.fill(loss, 0.0f);
  int64_t before = be.memory_stats().current_bytes;
  be.reset_peak_memory();
  model.forward(tok);
  model.backward(tok, tok, 1.0f, true, loss);
  model.finish_grads();
  EXPECT_EQ(be.memory_stats().peak_bytes, before);
  // Weights: f32 master + bf16 copy + f32 grads, 10 bytes per (aligned) parameter element.
  EXPECT_EQ(be.memory_by_tag().at("master_weights").current_bytes, 4 * model.params().total_elems);
  EXPECT_EQ(be.memory_by_tag().at("weights").current_bytes, 2 * model.params().total_elems);
  EXPECT_EQ(be.memory_by_tag().at("grads").current_bytes, 4 * model.params().total_elems);
}

}  // namespace
}  // namespace mplan::exec
