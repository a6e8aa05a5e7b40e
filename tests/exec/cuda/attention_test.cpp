// The flash-attention kernels (tensor cores) and the reference kernels against the CPU backend:
// forward output and log-sum-exp, backward dQ/dK/dV and dqkv's column sums (QKV's bias gradient:
// OpChecker::attention asks for them), for head dims 8..128 and sequence lengths
// that are not multiples of the 64/128-row tiles; grouped-query attention; many heads (several key
// blocks per backward block); bitwise determinism of two runs; and the fast kernels against the
// reference kernels at the reference workload's head dim.
#include <cmath>
#include <random>
#include <vector>

#include "exec/cpu/bf16.hpp"
#include "tests/exec/cuda/gpu_test_support.hpp"

namespace mplan::exec::cuda::testing {
namespace {

using AttentionTest = GpuOpTest;

TEST_F(AttentionTest, HeadDim128MatchesCpu) {
  check().attention(128, 2, 2, 2, 128, DType::kBF16, false);
  check().attention(256, 1, 2, 2, 128, DType::kBF16, false);
  expect_all_pass();
}

TEST_F(AttentionTest, SequenceLengthsOffTheTiles) {
  for (int64_t s : {1, 2, 63, 65, 127, 129, 300})
    check().attention(s, 1, 2, 2, 128, DType::kBF16, false);
  // Head dim 64 walks query steps of 128: a last step of one row, of one 64-row chunk and a part
  // of the next, and of 64 rows exactly.
  for (int64_t s : {1, 63, 64, 65, 129, 191, 192, 255})
    check().attention(s, 2, 2, 2, 64, DType::kBF16, false);
  expect_all_pass();
}

TEST_F(AttentionTest, SmallerHeadDims) {
  for (int64_t d : {8, 24, 32, 40, 64, 72, 96, 120})
    check().attention(77, 2, 1, 1, d, DType::kBF16, false);
  expect_all_pass();
}

TEST_F(AttentionTest, ReferenceKernelsMatchCpu) {
  check().attention(130, 2, 2, 2, 128, DType::kBF16, true);
  check().attention(65, 1, 2, 2, 24, DType::kF32, true);
  expect_all_pass();
}

// b·heads = 140 is more than the 132 blocks the backward keeps resident, so one backward block
// takes several key blocks and adds their dQ partial sums into those of its first.
TEST_F(AttentionTest, ManyHeadsDealSeveralKeyBlocksToOneBackwardBlock) {
  check().attention(384, 2, 70, 70, 64, DType::kBF16, false);
  check().determinism(384, 2, 70, 70, 64);
  expect_all_pass();
}

// Grouped-query attention read in place: a backward block walks the heads of its chunk of a K/V
// group; off-tile lengths, head dims 64 and 128 (Hopper) and 40 (mma.sync only), one group and
// several, the reference kernels. The first shapes' plans deal one head per chunk (dK and dV
// added by the finalize); the last two keep whole groups in a block (summed in registers).
TEST_F(AttentionTest, GroupedQueryMatchesCpu) {
  check().attention(300, 2, 8, 2, 128, DType::kBF16, false);
  check().attention(257, 1, 6, 3, 64, DType::kBF16, false);
  check().attention(100, 2, 4, 1, 40, DType::kBF16, false);
  check().attention(640, 1, 32, 8, 128, DType::kBF16, false);
  check().attention(130, 1, 4, 2, 64, DType::kBF16, true);
  check().determinism(384, 2, 8, 2, 128);
  check().attention(100, 33, 8, 4, 64, DType::kBF16, false);
  check().attention(64, 33, 8, 4, 128, DType::kBF16, false);
  check().determinism(64, 33, 8, 4, 128);
  // One chunk of two heads a block (33 · 8 key blocks fill two waves): QKV's column sums come
  // from the kernel's registers, dK's and dV's summed over the chunk's heads.
  check().attention(1024, 33, 2, 1, 64, DType::kBF16, false);
  check().determinism(1024, 33, 2, 1, 64);
  expect_all_pass();
}

TEST_F(AttentionTest, TwoRunsAreBitwiseEqual) {
  check().determinism(384, 2, 2, 2, 128);
  expect_all_pass();
}

TEST_F(AttentionTest, FastKernelsMatchReferenceKernelsAtWorkloadHeadDim) {
  // s = 1024 (several key blocks per query block), 4 heads of 128.
  const int64_t s = 1024, b = 1, heads = 4, d = 128;
  CudaBackend& g = gpu();
  Tensor qkv = g.alloc(DType::kBF16, {s, b, 3 * heads, d}, "test");
  Tensor out[2], lse[2], dqkv[2];
  Tensor dout = g.alloc(DType::kBF16, {s, b, heads, d}, "test");
  std::vector<uint16_t> host(static_cast<size_t>(qkv.numel()));
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> u(-2, 2);
  for (auto& v : host) v = f32_to_bf16(u(gen));
  g.upload(qkv, host.data());
  host.resize(static_cast<size_t>(dout.numel()));
  for (auto& v : host) v = f32_to_bf16(u(gen));
  g.upload(dout, host.data());
  const AttentionKernels fast = g.attention_kernels();  // MPLAN_ATTENTION may pick the family
  for (int naive = 0; naive < 2; ++naive) {
    out[naive] = g.alloc(DType::kBF16, {s, b, heads, d}, "test");
    lse[naive] = g.alloc(DType::kF32, {b, heads, s}, "test");
    dqkv[naive] = g.alloc(DType::kBF16, {s, b, 3 * heads, d}, "test");
    g.set_attention_kernels(naive == 1 ? AttentionKernels::kReference : fast);
    g.attention_forward(qkv, out[naive], lse[naive], 1.0f / std::sqrt(128.0f));
    // Both backward passes from the fast forward's outputs, so they see the same inputs.
    g.attention_backward(qkv, out[0], dout, lse[0], 1.0f / std::sqrt(128.0f), dqkv[naive]);
  }
  g.set_attention_kernels(fast);
  auto read_bf16 = [&](Tensor t) {
    std::vector<uint16_t> b16(static_cast<size_t>(t.numel()));
    g.download(b16.data(), t);
    std::vector<float> f(b16.size());
    for (size_t i = 0; i < f.size(); ++i) f[i] = bf16_to_f32(b16[i]);
    return f;
  };
  auto rel_l2 = [](const std::vector<float>& a, const std::vector<float>& r) {
    double num = 0, den = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      num += (a[i] - r[i]) * static_cast<double>(a[i] - r[i]);
      den += static_cast<double>(r[i]) * r[i];
    }
    return std::sqrt(num / den);
  };
  const double e_out = rel_l2(read_bf16(out[0]), read_bf16(out[1]));
  const double e_dqkv = rel_l2(read_bf16(dqkv[0]), read_bf16(dqkv[1]));
  std::printf("  fast vs reference kernels: out rel_l2 %.2e, dqkv rel_l2 %.2e\n", e_out, e_dqkv);
  EXPECT_LT(e_out, 1e-2);
  EXPECT_LT(e_dqkv, 1.5e-2);
  for (Tensor* t : {&qkv, &dout, &out[0], &out[1], &lse[0], &lse[1], &dqkv[0], &dqkv[1]})
    g.release(*t);
}

}  // namespace
}  // namespace mplan::exec::cuda::testing
