// StageModel (one rank, CPU backend): against the independent oracle (golden.json, written by
// tests/exec/oracle/make_golden.py with PyTorch in float64: logits, loss, every gradient, the
// gradient norm and three AdamW steps with clipping; the check is support/golden_gpt.hpp), f32
// tightly and bf16 loosely; no allocation after the first micro-batches; and on the CPU, whose
// ops are deterministic, recomputation (selective, full uniform and block at several group
// sizes) and the zero-bubble split of the backward into B and W give bitwise the gradients and
// losses of the plain run.
#include "exec/model/stage_model.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "exec/cpu/cpu_backend.hpp"
#include "exec/parallel/grad_sync.hpp"
#include "tests/exec/support/golden_gpt.hpp"
#include "tests/exec/support/test_tensors.hpp"
#include "tests/exec/support/two_microbatches.hpp"

namespace mplan::exec {
namespace {

using testing::golden_stage;
using testing::load_golden;
using testing::run_golden;

TEST(StageModelGolden, F32MatchesTorchFloat64) {
  CpuBackend be;
  run_golden(be, DType::kF32, {1e-4, 1e-5, 1e-4, 1e-5});
}

TEST(StageModelGolden, Bf16MatchesTorchFloat64Loosely) {
  CpuBackend be;
  run_golden(be, DType::kBF16, {2e-2, 2e-3, 6e-2, 2e-2});
}

// The Llama family (RMSNorm, RoPE, grouped-query attention, SwiGLU, no biases, untied output).
TEST(StageModelGolden, LlamaF32MatchesTorchFloat64) {
  CpuBackend be;
  run_golden(be, DType::kF32, {1e-4, 1e-5, 1e-4, 1e-5}, "golden_llama.json");
}

TEST(StageModelGolden, LlamaBf16MatchesTorchFloat64Loosely) {
  CpuBackend be;
  run_golden(be, DType::kBF16, {2e-2, 2e-3, 6e-2, 2e-2}, "golden_llama.json");
}

// A 4-layer version of the golden model's shape.
StageSpec four_layers(DType act) {
  StageSpec s = golden_stage(load_golden(), act);
  s.model.num_layers = 4;
  s.seed = 7;
  return s;
}

struct PassResult {
  std::vector<float> grads;
  float loss = 0;
};

// F0 F1 B0 B1 (and W0 W1 when split) on two micro-batches of fixed tokens, onto the zeroed
// gradient buffer of a new model. With `again`, that pass is followed by a second: begin_grads(),
// every parameter's gradient then filled with NaN (what they hold must not be read; the gaps
// between them stay zero, as ParamLayout says), and the pass again.
PassResult run_two(const StageSpec& spec, CpuBackend& be, bool again = false) {
  testing::SoloComm solo;
  StageModel model(spec, be, solo, nullptr);
  const GptDims& d = model.dims();
  GradSync sync(model.params(), model.grads(), be, solo, true, false, nullptr);
  std::vector<float> tokens(static_cast<size_t>(2 * d.tokens()));
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<float>((i * 7 + 3) % 50);
  Tensor tok = testing::make(be, DType::kI32, {2, d.seq, d.micro_batch}, tokens);
  Tensor loss = testing::make(be, DType::kF32, {1}, {0.0f});
  for (int pass = 0; pass < (again ? 2 : 1); ++pass)
    testing::two_microbatch_step(model, be, sync, tok, loss, 0.01f, spec.split_backward, pass > 0);
  PassResult r{testing::read(be, model.grads()), testing::read(be, loss)[0]};
  be.release(tok);
  be.release(loss);
  return r;
}

TEST(StageModel, RecomputationAndTheSplitBackwardAreBitwiseThePlainRun) {
  for (DType act : {DType::kF32, DType::kBF16}) {
    CpuBackend be;
    const PassResult plain = run_two(four_layers(act), be);
    struct Case {
      Recompute mode;
      RecomputeMethod method;
      int64_t layers;
      bool split;
    };
    for (const Case& c : std::vector<Case>{{Recompute::kSelective, RecomputeMethod::kUniform, 1, 0},
                                           {Recompute::kFull, RecomputeMethod::kUniform, 1, 0},
                                           {Recompute::kFull, RecomputeMethod::kUniform, 3, 0},
                                           {Recompute::kFull, RecomputeMethod::kUniform, 4, 0},
                                           {Recompute::kFull, RecomputeMethod::kBlock, 2, 0},
                                           {Recompute::kNone, RecomputeMethod::kUniform, 1, 1},
                                           {Recompute::kSelective, RecomputeMethod::kUniform, 1, 1},
                                           {Recompute::kFull, RecomputeMethod::kUniform, 2, 1},
                                           {Recompute::kFull, RecomputeMethod::kBlock, 3, 1}}) {
      StageSpec s = four_layers(act);
      s.parallel.recompute = c.mode;
      s.parallel.recompute_method = c.method;
      s.parallel.recompute_num_layers = c.layers;
      s.split_backward = c.split;
      SCOPED_TRACE(::testing::Message()
                   << to_string(act) << " " << to_string(c.mode) << " " << to_string(c.method)
                   << " " << c.layers << (c.split ? " split" : ""));
      const PassResult got = run_two(s, be);
      EXPECT_EQ(got.loss, plain.loss);
      EXPECT_TRUE(got.grads == plain.grads);
    }
  }
}

// begin_grads() fills nothing: each gradient's first write of the pass overwrites it (a GEMM's
// beta 0; the adding kernels' outputs zeroed first). Over a buffer of NaN the second pass gives
// bitwise the first's gradients, for GPT (biases, tied embeddings) and the Llama family
// (RMSNorm, no biases, untied output), split backward or not.
TEST(StageModel, GradientsNeedNoZeroedBuffer) {
  for (const char* file : {"golden.json", "golden_llama.json"}) {
    for (bool split : {false, true}) {
      CpuBackend be;
      StageSpec s = testing::golden_stage(load_golden(file), DType::kBF16);
      s.split_backward = split;
      SCOPED_TRACE(::testing::Message() << file << (split ? " split" : ""));
      const PassResult first = run_two(s, be);
      const PassResult second = run_two(s, be, /*again=*/true);
      EXPECT_EQ(second.loss, first.loss);
      EXPECT_TRUE(second.grads == first.grads);
      EXPECT_TRUE(std::none_of(first.grads.begin(), first.grads.end(),
                               [](float g) { return std::isnan(g); }));
    }
  }
}

TEST(StageModel, AllocatesNothingAfterTheFirstMicroBatches) {
  CpuBackend be;
  testing::SoloComm solo;
  StageSpec spec = four_layers(DType::kBF16);
  spec.parallel.recompute = Recompute::kFull;
  StageModel model(spec, be, solo, nullptr);
  const GptDims& d = model.dims();
  Tensor tok = be.alloc(DType::kI32, {d.seq, d.micro_batch}, "t");
  be.fill(tok, 3.0f);
  Tensor loss = be.alloc(DType::kF32, {1}, "t");
  be.fill(loss, 0.0f);
  auto round = [&] {
    for (int64_t k : {0, 1}) model.forward(0, k, tok, tok, 1.0f, loss, nullptr);
    for (int64_t k : {0, 1}) model.backward(0, k, tok, nullptr);
  };
  round();  // the pools grow to two micro-batches in flight
  const int64_t before = be.memory_stats().current_bytes;
  be.reset_peak_memory();
  round();
  EXPECT_EQ(be.memory_stats().peak_bytes, before);
  EXPECT_EQ(model.activation_slots(), std::vector<size_t>{2});
  // Weights: bf16 copy + f32 grads, 6 bytes per (aligned) parameter element here (the master
  // weights and Adam's moments belong to the optimizer).
  EXPECT_EQ(be.memory_by_tag().at("weights").current_bytes, 2 * model.params().total_elems);
  EXPECT_EQ(be.memory_by_tag().at("grads").current_bytes, 4 * model.params().total_elems);
  // Full recompute keeps the layer input only: per micro-batch the 4 checkpoints (s, b, h) bf16,
  // and the head's final-norm input and output, its statistics, the loss rows and the logits.
  const int64_t T = d.tokens(), h = d.hidden, V = d.vocab_local();
  const int64_t per_slot = 4 * 2 * T * h + 2 * T * h + 8 * T + 16 * T + 2 * T * h + 2 * T * V;
  EXPECT_EQ(be.memory_by_tag().at("activations").current_bytes, 2 * per_slot);
}

// Interleaved stages: chunks of one layout share their slots, so a stage holds as many as are in
// flight over all its chunks (as a caching allocator would), not each chunk's peak summed.
TEST(StageModel, ChunksOfOneLayoutShareTheirSlots) {
  for (bool split : {false, true}) {
    SCOPED_TRACE(split ? "split backward" : "fused backward");
    CpuBackend be;
    testing::SoloComm solo;
    StageSpec spec = four_layers(DType::kBF16);
    spec.parallel.pp = 2;
    spec.parallel.vpp = 2;  // pipeline rank 0: chunk 0 (embedding + layer 0), chunk 1 (layer 2)
    spec.split_backward = split;
    StageModel model(spec, be, solo, nullptr);
    ASSERT_EQ(model.num_chunks(), 2);
    const GptDims& d = model.dims();
    Tensor tok = be.alloc(DType::kI32, {d.seq, d.micro_batch}, "t");
    be.fill(tok, 3.0f);
    Tensor loss = be.alloc(DType::kF32, {1}, "t");
    be.fill(loss, 0.0f);
    auto chunk_round = [&](int c) {  // two micro-batches through chunk c, forward then backward
      for (int64_t k : {0, 1}) {
        if (c == 1) be.fill(model.forward_input(1, k), 0.5f);
        model.forward(c, k, tok, tok, 1.0f, loss, nullptr);
        model.release(model.take_forward_output(c, k));
      }
      for (int64_t k : {0, 1}) {
        be.fill(model.backward_grad_input(c, k), 0.25f);
        model.backward(c, k, tok, nullptr);
        if (split) model.weight_grad(c, k, tok, nullptr);
        if (c == 1) model.release(model.take_backward_output(1, k));
      }
    };
    chunk_round(0);
    const int64_t after_chunk0 = be.memory_by_tag().at("activations").current_bytes;
    chunk_round(1);  // takes the two slots chunk 0 gave back
    EXPECT_EQ(be.memory_by_tag().at("activations").current_bytes, after_chunk0);
    EXPECT_EQ(model.activation_slots(), (std::vector<size_t>{2, 2}));
  }
}

TEST(StageModel, ForwardOnlyGivesTheLossAndKeepsNothing) {
  // Evaluation mode: the same per-token loss as the training forward (bitwise on the CPU), no
  // gradient written, and each micro-batch's slots back in the pool as soon as its F ends (one
  // slot however many forwards run), with or without a split backward.
  for (bool split : {false, true}) {
    CpuBackend be;
    testing::SoloComm solo;
    StageSpec spec = four_layers(DType::kBF16);
    spec.split_backward = split;
    StageModel model(spec, be, solo, nullptr);
    const GptDims& d = model.dims();
    std::vector<float> tokens(static_cast<size_t>(d.tokens()));
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<float>((i * 5 + 1) % 50);
    Tensor tok = testing::make(be, DType::kI32, {d.seq, d.micro_batch}, tokens);
    Tensor train_loss = testing::make(be, DType::kF32, {1}, {0.0f});
    Tensor eval_loss = testing::make(be, DType::kF32, {1}, {0.0f});
    model.set_forward_only(true);
    for (int64_t k : {0, 1, 2}) model.forward(0, k, tok, tok, 0.5f, eval_loss, nullptr);
    EXPECT_EQ(model.activation_slots(), std::vector<size_t>{1});
    const std::vector<float> grads = testing::read(be, model.grads());
    EXPECT_TRUE(std::all_of(grads.begin(), grads.end(), [](float g) { return g == 0.0f; }));
    model.set_forward_only(false);
    model.forward(0, 0, tok, tok, 0.5f, train_loss, nullptr);
    EXPECT_EQ(testing::read(be, eval_loss)[0], 3 * testing::read(be, train_loss)[0]);
    model.backward(0, 0, tok, nullptr);
    if (split) model.weight_grad(0, 0, tok, nullptr);
    be.release(tok);
    be.release(train_loss);
    be.release(eval_loss);
  }
  // The loss-only cross-entropy leaves the logits as they are.
  CpuBackend be;
  Tensor logits = testing::make(be, DType::kF32, {2, 3}, {1, 2, 3, 0, 0, 5});
  Tensor targets = testing::make(be, DType::kI32, {2}, {2, 0});
  Tensor row_max = testing::make(be, DType::kF32, {2}, {0, 0});
  Tensor stats = testing::make(be, DType::kF32, {4}, {0, 0, 0, 0});
  Tensor loss = testing::make(be, DType::kF32, {2}, {0, 0});
  be.xent_local_max(logits, row_max);
  be.xent_local_stats(logits, targets, 0, row_max, stats);
  be.xent_loss_and_grad(logits.flat_slice(0, 0).view({2, 0}), targets, 0, row_max, stats, 1.0f,
                        loss);
  EXPECT_EQ(testing::read(be, logits), (std::vector<float>{1, 2, 3, 0, 0, 5}));
  const std::vector<float> l = testing::read(be, loss);
  EXPECT_NEAR(l[0], std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)) - 3.0, 1e-6);
  EXPECT_NEAR(l[1], std::log(2.0 + std::exp(5.0)), 1e-5);
  for (Tensor* t : {&logits, &targets, &row_max, &stats, &loss}) be.release(*t);
}

}  // namespace
}  // namespace mplan::exec
