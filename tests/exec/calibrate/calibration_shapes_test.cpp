// CalibrationShapes: the GEMMs of a model's linear layers at a micro-batch size and tp degree, as
// the simulator lowers them (m, n, k and kind), their deduplication over settings, and the
// attention shapes the CUDA kernels can take.
#include "exec/calibrate/calibration_shapes.hpp"

#include <gtest/gtest.h>

#include "src/common/error.hpp"

namespace mplan::exec::calibrate {
namespace {

bool has(const std::vector<GemmShape>& v, int64_t m, int64_t n, int64_t k, const char* kind) {
  for (const GemmShape& g : v)
    if (g.m == m && g.n == n && g.k == k && g.kind == kind) return true;
  return false;
}

TEST(CalibrationShapes, GptLinearLayersAtMbs4Tp1) {
  const ModelSpec m = load_model("gpt3-1.3b");  // h 2048, 16 heads, ffn 8192, vocab 32000
  const std::vector<GemmShape> s = linear_gemm_shapes(m, 4, 1);
  ASSERT_EQ(s.size(), 15u);  // 5 layers x (fwd, dx, dw)
  const int64_t T = 4 * 2048;
  EXPECT_EQ(s[0], (GemmShape{T, 6144, 2048, "fwd", "qkv", true}));  // qkv
  EXPECT_TRUE(s[0].bias);
  EXPECT_EQ(s[1], (GemmShape{T, 2048, 6144, "dx", "qkv", false}));
  EXPECT_EQ(s[2], (GemmShape{6144, 2048, T, "dw", "qkv", false}));
  EXPECT_TRUE(has(s, T, 2048, 2048, "fwd"));       // proj
  EXPECT_TRUE(has(s, T, 8192, 2048, "fwd_gelu"));  // fc1 with the bias + GeLU epilogue
  EXPECT_TRUE(has(s, T, 2048, 8192, "fwd"));       // fc2
  EXPECT_TRUE(has(s, T, 8192, 2048, "dx_dgelu"));  // fc2's input gradient through GeLU
  EXPECT_FALSE(has(s, T, 8192, 2048, "dx"));       // ... and not without the epilogue
  EXPECT_TRUE(has(s, 8192, 2048, T, "dw"));        // fc1 and fc2 weight gradients
  EXPECT_TRUE(has(s, T, 32000, 2048, "fwd"));      // logits
  EXPECT_FALSE(s.back().bias);
  // At tensor parallel 1 the row-parallel forwards (proj, fc2) add the residual in the epilogue.
  for (const GemmShape& g : s)
    EXPECT_EQ(g.residual, g.kind == "fwd" && (g.layer == "proj" || g.layer == "fc2")) << g.layer;
  EXPECT_DOUBLE_EQ(s[0].flops(), 2.0 * T * 6144 * 2048);
}

TEST(CalibrationShapes, LlamaShardsAtTp2) {
  const ModelSpec m = load_model("llama3.2-1b");  // 32 heads x 64, 8 groups, SwiGLU, no biases
  const std::vector<GemmShape> s = linear_gemm_shapes(m, 1, 2);
  const int64_t T = 4096;
  EXPECT_TRUE(has(s, T, 1024 + 2 * 256, 2048, "fwd"));  // qkv: q 1024 + k, v 256 each
  EXPECT_TRUE(has(s, T, 2048, 1024, "fwd"));            // proj
  // tp 2: the row-parallel forwards are reduced over tp first, the residual added after.
  for (const GemmShape& g : s) EXPECT_FALSE(g.residual) << g.layer;
  EXPECT_TRUE(has(s, T, 2 * 4096, 2048, "fwd"));    // fc1: gate and up, no GeLU epilogue
  EXPECT_TRUE(has(s, T, 2048, 4096, "fwd"));        // fc2
  EXPECT_TRUE(has(s, T, 4096, 2048, "dx"));         // its input gradient (SwiGLU: no epilogue)
  EXPECT_TRUE(has(s, T, 128256 / 2, 2048, "fwd"));  // logits over the padded vocabulary / tp
  for (const GemmShape& g : s) EXPECT_FALSE(g.bias) << g.layer;
}

TEST(CalibrationShapes, TpThatDoesNotDivideIsRefusedOrSkipped) {
  const ModelSpec m = load_model("gpt3-1.3b");
  EXPECT_THROW(linear_gemm_shapes(m, 1, 3), Error);
  EXPECT_EQ(gemm_shapes_for({m}, {1}, {3}).size(), 0u);
}

TEST(CalibrationShapes, SettingsRepeatNoShapeAndQuickIsSmaller) {
  const std::vector<ModelSpec> models{load_model("gpt3-1.3b"), load_model("llama3.2-1b")};
  const CalibrationSettings quick = calibration_settings(true, models);
  const CalibrationSettings full = calibration_settings(false, models);
  EXPECT_LT(quick.gemms.size(), full.gemms.size());
  EXPECT_LT(quick.attention.size(), full.attention.size());
  for (size_t i = 0; i < full.gemms.size(); ++i)
    for (size_t j = i + 1; j < full.gemms.size(); ++j)
      EXPECT_FALSE(full.gemms[i] == full.gemms[j]) << i << " " << j;
  EXPECT_EQ(quick.nccl_bytes.front(), 8.0);
  EXPECT_THROW(calibration_settings(true, {}), Error);
  // The norms at the models' hidden sizes besides 4096 (both models: 2048), once.
  EXPECT_EQ(full.memory_widths, std::vector<int64_t>{2048});
  CalibrationSettings s = calibration_settings(true, {load_model("llama3-8b")});  // 4096
  EXPECT_TRUE(s.memory_widths.empty());
  add_plan_shapes(s, load_model("gpt3-1.3b"), 1, 1);
  EXPECT_EQ(s.memory_widths, std::vector<int64_t>{2048});
}

TEST(CalibrationShapes, APlansOwnShapesAreAddedOnce) {
  const ModelSpec gpt = load_model("gpt3-1.3b");
  CalibrationSettings s = calibration_settings(true, {gpt});  // mbs 1, 4
  const size_t before = s.gemms.size(), attn = s.attention.size();
  add_plan_shapes(s, gpt, 4, 1);  // already there
  EXPECT_EQ(s.gemms.size(), before);
  EXPECT_EQ(s.attention.size(), attn);
  // New: 5 linears x 3 passes, less one: FC1's and FC2's weight gradients are both
  // (8192, 2048, tokens) in GPT's 4h MLP. And one attention shape.
  add_plan_shapes(s, gpt, 8, 1);
  EXPECT_EQ(s.gemms.size(), before + 14);
  EXPECT_EQ(s.attention.size(), attn + 1);
  EXPECT_EQ(s.attention.back(), (AttentionShape{8, 16, 2048, 128}));
}

TEST(CalibrationShapes, AttentionOfTheModelsAndTheGrid) {
  const ModelSpec gpt = load_model("gpt3-1.3b");
  const std::vector<AttentionShape> a =
      attention_shapes_for({gpt}, {4}, {1, 2}, {1}, {8}, {1024}, {64, 256});
  ASSERT_EQ(a.size(), 3u);  // b4 16 heads, b4 8 heads, then the grid's d 64 (d 256 left out)
  EXPECT_EQ(a[0], (AttentionShape{4, 16, 2048, 128}));
  EXPECT_EQ(a[1], (AttentionShape{4, 8, 2048, 128}));
  EXPECT_EQ(a[2], (AttentionShape{1, 8, 1024, 64}));
  EXPECT_DOUBLE_EQ(a[0].forward_flops(), 4.0 * 4 * 16 * 2048.0 * 2048 * 128 / 2);
  EXPECT_DOUBLE_EQ(a[0].backward_flops(), 2.5 * a[0].forward_flops());
}

}  // namespace
}  // namespace mplan::exec::calibrate
