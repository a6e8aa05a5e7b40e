// The golden GPT check, shared by the CPU (tests/exec/model/gpt_model_test.cpp) and CUDA
// (tests/exec/cuda/gpt_model_gpu_test.cpp) backends: StageModel on one rank against golden.json,
// written by tests/exec/oracle/make_golden.py with PyTorch in float64 (logits, loss, every
// gradient, the gradient norm, three AdamW steps with clipping). Tolerances are the caller's.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "exec/model/stage_model.hpp"
#include "exec/parallel/grad_sync.hpp"
#include "exec/parallel/optimizer.hpp"
#include "tests/exec/support/test_tensors.hpp"
#include "tests/src/model/test_gpt.hpp"

namespace mplan::exec::testing {

// The oracle file: $MPLAN_EXEC_GOLDEN when set (binaries run away from their build tree), else
// the path compiled in (MPLAN_EXEC_GOLDEN).
// `name` picks a file beside it: "golden.json" (the GPT) or "golden_llama.json".
inline nlohmann::json load_golden(const std::string& name = "golden.json") {
  const char* env = std::getenv("MPLAN_EXEC_GOLDEN");
  std::string path = env != nullptr ? env : MPLAN_EXEC_GOLDEN;
  path = path.substr(0, path.find_last_of('/') + 1) + name;
  std::ifstream f(path);
  EXPECT_TRUE(f.good()) << "cannot read " << path;
  return nlohmann::json::parse(f);
}

// The oracle's model (its "config" object): no vocabulary padding, as in the oracle.
// The Llama oracle (make_golden_llama.py): RMSNorm, RoPE, grouped-query attention, SwiGLU, no
// biases, untied output.
inline ModelSpec golden_model(const nlohmann::json& c) {
  ModelSpec m = test::gpt(c["layers"], c["hidden"], c["heads"], c["seq"], c["vocab"]);
  m.ffn_hidden_size = c["ffn"];
  m.make_vocab_size_divisible_by = m.vocab_size;
  if (c.contains("llama")) {
    m.num_query_groups = c["groups"];
    m.activation = Activation::kSwiglu;
    m.normalization = Normalization::kRmsNorm;
    m.position_embedding = PositionEmbedding::kRope;
    m.rotary_base = c["rotary_base"];
    m.tied_embeddings = false;
    m.add_bias_linear = false;
    return m;
  }
  m.max_position_embeddings = c["max_positions"];
  return m;
}

inline double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::abs(x));
  return m;
}

struct GoldenTol {
  double logits_rtol, loss_rtol, grad_rel, norm_rtol;
};

// The golden model as a one-rank plan layout (tp 1, pp 1, dp 1) of micro-batch `micro_batch`.
inline StageSpec golden_stage(const nlohmann::json& g, DType act) {
  const auto& c = g["config"];
  StageSpec s;
  s.model = golden_model(c);
  s.parallel.micro_batch_size = c["micro_batch"];
  s.parallel.global_batch_size = c["micro_batch"];
  s.act = act;
  s.seed = g["seed"].get<uint64_t>();
  s.init_method_std = g["init_method_std"];
  return s;
}

// Trains the golden model with `act` activations on `be` through the oracle's steps: logits and
// every gradient of step 0 within tol (relative to the largest element of the reference), loss
// and gradient norm of every step within tol of the oracle's.
inline void run_golden(Backend& be, DType act, const GoldenTol& tol,
                       const std::string& file = "golden.json") {
  nlohmann::json g = load_golden(file);
  SoloComm solo;
  StageModel model(golden_stage(g, act), be, solo, nullptr);
  const GptDims& d = model.dims();
  GradSync sync(model.params(), model.grads(), be, solo, true, false, nullptr);
  const auto& o = g["optimizer"];
  OptimizerConfig oc{o["lr"], o["beta1"], o["beta2"], o["eps"], o["weight_decay"], o["clip_grad"]};
  Optimizer opt(model.params(), 0, {{0, model.params().total_elems}}, model.weights(),
                model.grads(), be, oc, [&](const ParamSpec& s, int64_t b, int64_t e, float* out) {
                  model.init_values(s, b, e, out);
                });
  const ChunkParams& chunk = model.chunk(0);
  const int64_t T = d.tokens();
  Tensor tok = be.alloc(DType::kI32, {d.seq, d.micro_batch}, "t");
  Tensor tgt = be.alloc(DType::kI32, {d.seq, d.micro_batch}, "t");
  Tensor scalars = be.alloc(DType::kF32, {2}, "t");
  Tensor logits = be.alloc(act, {T, d.vocab_local()}, "t");
  int64_t step = 0;
  for (const auto& s : g["steps"]) {
    SCOPED_TRACE(::testing::Message() << "step " << step);
    std::vector<int32_t> in = s["inputs"], out = s["targets"];
    ASSERT_EQ(static_cast<int64_t>(in.size()), T);
    be.upload(tok, in.data());
    be.upload(tgt, out.data());
    be.fill(scalars, 0.0f);
    model.begin_grads();
    sync.begin_step();
    model.forward(0, 0, tok, tgt, 1.0f / static_cast<float>(T), scalars.flat_slice(0, 1), &sync);
    if (step == 0) {  // the logits from the final norm's output (the loss overwrote them)
      const HeadWeightInputs head = model.head_inputs(0, 0);
      be.gemm({.trans_b = true, .m = T, .n = d.vocab_local(), .k = d.hidden}, head.yf,
              model.weight(chunk.output), logits);
      std::vector<double> want = s["logits"];
      EXPECT_TRUE(
          all_close(read(be, logits), want, tol.logits_rtol, tol.logits_rtol * max_abs(want)));
    }
    model.backward(0, 0, tok, &sync);
    model.settle_grads();
    sync.finish();
    opt.grad_sum_squares(scalars.flat_slice(1, 1));
    auto sc = read(be, scalars);
    EXPECT_NEAR(sc[0] / T, s["loss"].get<double>(), tol.loss_rtol * s["loss"].get<double>());
    const double norm = std::sqrt(static_cast<double>(sc[1]));
    EXPECT_NEAR(norm, s["grad_norm"].get<double>(), tol.norm_rtol * s["grad_norm"].get<double>());
    if (step == 0) {
      const auto& grads = s["grads"];
      int checked = 0;
      for (size_t i = 0; i < model.params().specs.size(); ++i) {
        const ParamSpec& p = model.params().specs[i];
        SCOPED_TRACE(p.name);
        ASSERT_TRUE(grads.contains(p.name));
        std::vector<double> want = grads[p.name];
        const double scale = std::max(max_abs(want), 1e-6);
        EXPECT_TRUE(all_close(read(be, model.grad(static_cast<int>(i))), want, tol.grad_rel,
                              tol.grad_rel * scale));
        ++checked;
      }
      EXPECT_EQ(checked, static_cast<int>(grads.size()));
    }
    opt.step(++step, opt.clip_coefficient(norm));
  }
  EXPECT_EQ(step, 3);
  for (Tensor* t : {&tok, &tgt, &scalars, &logits}) be.release(*t);
}

}  // namespace mplan::exec::testing
