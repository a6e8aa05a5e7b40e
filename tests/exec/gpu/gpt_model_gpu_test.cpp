// GptModel on the CUDA backend: the golden GPT against the PyTorch float64 oracle (golden.json,
// as tests/exec/model/gpt_model_test.cpp does for the CPU backend: logits, loss, every gradient,
// gradient norm, three AdamW steps with clipping) in bf16 and f32; a GPT with head dim 128 (the
// tensor-core attention at the reference head dim) against the same model on the CPU backend;
// and two GPU runs from the same seed giving bitwise-identical losses and gradients.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "exec/cpu/cpu_backend.hpp"
#include "exec/cuda/cuda_backend.hpp"
#include "exec/model/gpt_model.hpp"
#include "exec/model/gpt_params.hpp"
#include "exec/parallel/optimizer.hpp"
#include "tests/exec/gpu/gpu_test_support.hpp"
#include "tests/exec/support/test_tensors.hpp"

namespace mplan::exec::cuda::testing {
namespace {

using ::mplan::exec::testing::all_close;
using ::mplan::exec::testing::read;
using ::mplan::exec::testing::SoloComm;

// The oracle file: $MPLAN_EXEC_GOLDEN when set (binaries run away from their build tree), else
// the path compiled in.
nlohmann::json load_golden() {
  const char* env = std::getenv("MPLAN_EXEC_GOLDEN");
  const std::string path = env != nullptr ? env : MPLAN_EXEC_GOLDEN;
  std::ifstream f(path);
  EXPECT_TRUE(f.good()) << "cannot read " << path;
  return nlohmann::json::parse(f);
}

ModelSpec tiny_model(int64_t layers, int64_t hidden, int64_t heads, int64_t ffn, int64_t vocab,
                     int64_t seq, int64_t max_positions) {
  ModelSpec m;
  m.name = "test";
  m.num_layers = layers;
  m.hidden_size = hidden;
  m.num_attention_heads = heads;
  m.num_query_groups = heads;
  m.kv_channels = hidden / heads;
  m.ffn_hidden_size = ffn;
  m.vocab_size = vocab;
  m.make_vocab_size_divisible_by = vocab;  // no padding
  m.seq_length = seq;
  m.max_position_embeddings = max_positions;
  return m;
}

double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::abs(x));
  return m;
}

struct GoldenTol {
  double logits_rtol, loss_rtol, grad_rel, norm_rtol;
};

void run_golden(DType act, const GoldenTol& tol) {
  nlohmann::json g = load_golden();
  const auto& c = g["config"];
  GptDims d = gpt_dims(tiny_model(c["layers"], c["hidden"], c["heads"], c["ffn"], c["vocab"],
                                  c["seq"], c["max_positions"]),
                       c["micro_batch"], 1, 0, false);
  CudaBackend be(0);
  SoloComm solo;
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
    const double norm = std::sqrt(static_cast<double>(sc[1]));
    EXPECT_NEAR(norm, s["grad_norm"].get<double>(), tol.norm_rtol * s["grad_norm"].get<double>());
    if (step == 0) {
      const auto& grads = g["steps"][0]["grads"];
      for (size_t i = 0; i < model.params().specs.size(); ++i) {
        const ParamSpec& p = model.params().specs[i];
        SCOPED_TRACE(p.name);
        ASSERT_TRUE(grads.contains(p.name));
        std::vector<double> want = grads[p.name];
        const double scale = std::max(max_abs(want), 1e-6);
        EXPECT_TRUE(all_close(read(be, model.grad(static_cast<int>(i))), want, tol.grad_rel,
                              tol.grad_rel * scale));
      }
    }
    opt.step(++step, opt.clip_coefficient(norm));
  }
  EXPECT_EQ(step, 3);
  for (Tensor* t : {&tok, &tgt, &scalars}) be.release(*t);
}

// The CPU backend's bf16 tolerances (tests/exec/model/gpt_model_test.cpp).
TEST(GptModelGpuGolden, Bf16MatchesTorchFloat64Loosely) {
  MPLAN_REQUIRE_GPU();
  run_golden(DType::kBF16, {2e-2, 2e-3, 6e-2, 2e-2});
}

// f32 activations (f32 GEMMs without TF32, reference attention kernels): twice the CPU's
// tolerances, for the different summation orders.
TEST(GptModelGpuGolden, F32MatchesTorchFloat64) {
  MPLAN_REQUIRE_GPU();
  run_golden(DType::kF32, {2e-4, 2e-5, 2e-4, 2e-5});
}

// One forward/backward of a GPT with head dim 128 on `be`: the summed loss, then every gradient.
struct StepResult {
  float loss = 0;
  std::vector<std::vector<float>> grads;
};

StepResult one_step(Backend& be, const GptDims& d, uint64_t seed) {
  SoloComm solo;
  GptModel model(d, DType::kBF16, be, solo, solo, seed, 0.02, 0);
  Tensor tok = be.alloc(DType::kI32, {d.seq, d.micro_batch}, "t");
  Tensor tgt = be.alloc(DType::kI32, {d.seq, d.micro_batch}, "t");
  Tensor loss = be.alloc(DType::kF32, {1}, "t");
  std::mt19937 gen(static_cast<uint32_t>(seed));
  std::uniform_int_distribution<int32_t> u(0, static_cast<int32_t>(d.vocab - 1));
  std::vector<int32_t> in(static_cast<size_t>(d.tokens())), out(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    in[i] = u(gen);
    out[i] = u(gen);
  }
  be.upload(tok, in.data());
  be.upload(tgt, out.data());
  be.fill(loss, 0.0f);
  model.zero_grads();
  model.forward(tok);
  model.backward(tok, tgt, 1.0f / static_cast<float>(d.tokens()), true, loss);
  model.finish_grads();
  StepResult r;
  r.loss = read(be, loss)[0];
  for (size_t i = 0; i < model.params().specs.size(); ++i)
    r.grads.push_back(read(be, model.grad(static_cast<int>(i))));
  for (Tensor* t : {&tok, &tgt, &loss}) be.release(*t);
  return r;
}

GptDims head_dim_128_dims() {
  // 2 layers, hidden 256 = 2 heads × 128, ffn 1024, vocab 512, sequence 160 (off the tiles).
  return gpt_dims(tiny_model(2, 256, 2, 1024, 512, 160, 160), 2, 1, 0, false);
}

TEST(GptModelGpu, HeadDim128MatchesCpuBackend) {
  MPLAN_REQUIRE_GPU();
  const GptDims d = head_dim_128_dims();
  CudaBackend gpu(0);
  CpuBackend cpu;
  const StepResult g = one_step(gpu, d, 99), c = one_step(cpu, d, 99);
  // Both in bf16, rounding at different points (fused epilogues, bf16 P in attention): the
  // summed loss within 0.5 %, each gradient within 5 % in relative L2 norm.
  EXPECT_NEAR(g.loss, c.loss, 5e-3 * std::abs(c.loss));
  ASSERT_EQ(g.grads.size(), c.grads.size());
  const GptParams params = make_gpt_params(d);
  for (size_t i = 0; i < g.grads.size(); ++i) {
    double num = 0, den = 0;
    for (size_t j = 0; j < g.grads[i].size(); ++j) {
      const double diff = static_cast<double>(g.grads[i][j]) - c.grads[i][j];
      num += diff * diff;
      den += static_cast<double>(c.grads[i][j]) * c.grads[i][j];
    }
    const double rel = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
    std::printf("  %-48s rel_l2 %.2e\n", params.specs[i].name.c_str(), rel);
    EXPECT_LT(rel, 5e-2) << params.specs[i].name;
  }
}

TEST(GptModelGpu, TwoRunsFromOneSeedAreBitwiseEqual) {
  MPLAN_REQUIRE_GPU();
  const GptDims d = head_dim_128_dims();
  CudaBackend gpu(0);
  const StepResult a = one_step(gpu, d, 7), b = one_step(gpu, d, 7);
  EXPECT_EQ(std::memcmp(&a.loss, &b.loss, sizeof(float)), 0) << a.loss << " vs " << b.loss;
  ASSERT_EQ(a.grads.size(), b.grads.size());
  for (size_t i = 0; i < a.grads.size(); ++i)
    EXPECT_EQ(std::memcmp(a.grads[i].data(), b.grads[i].data(), a.grads[i].size() * sizeof(float)),
              0)
        << "gradient " << i << " differs between two runs";
}

}  // namespace
}  // namespace mplan::exec::cuda::testing
