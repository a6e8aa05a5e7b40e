// GptModel (one rank, CPU backend) against the independent oracle: golden.json, written by
// tests/exec/oracle/make_golden.py with PyTorch in float64 (logits, loss, every gradient, the
// gradient norm and three AdamW steps with clipping; the check is support/golden_gpt.hpp). f32
// activations are held to tight tolerances, bf16 to loose ones. No torch is needed here: only
// the committed JSON.
#include "exec/model/gpt_model.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "exec/cpu/cpu_backend.hpp"
#include "tests/exec/support/golden_gpt.hpp"
#include "tests/exec/support/test_tensors.hpp"

namespace mplan::exec {
namespace {

using testing::golden_model;
using testing::load_golden;
using testing::run_golden;

TEST(GptModelGolden, F32MatchesTorchFloat64) {
  CpuBackend be;
  run_golden(be, DType::kF32, {1e-4, 1e-5, 1e-4, 1e-5});
}

TEST(GptModelGolden, Bf16MatchesTorchFloat64Loosely) {
  CpuBackend be;
  run_golden(be, DType::kBF16, {2e-2, 2e-3, 6e-2, 2e-2});
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
