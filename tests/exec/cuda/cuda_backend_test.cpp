// CudaBackend's memory-bound kernels against the CPU backend (elementwise, bias gradient,
// layernorm, embeddings, cross-entropy, sums, AdamW) on random inputs, in bf16 and f32, with
// sizes that exercise both the 16-byte vector paths and the scalar tails; plus the backend's
// own duties: memory accounting, streams and events, and a step that allocates nothing.
#include <vector>

#include "exec/cuda/cuda_check.hpp"
#include "tests/exec/cuda/gpu_test_support.hpp"

namespace mplan::exec::cuda::testing {
namespace {

using CudaBackendTest = GpuOpTest;

TEST_F(CudaBackendTest, ElementwiseOps) {
  for (int64_t n : {1, 7, 8, 1000, 1003, 65536 + 5}) {
    check().elementwise(n, DType::kBF16);
    check().elementwise(n, DType::kF32);
  }
  expect_all_pass();
}

TEST_F(CudaBackendTest, BiasGradient) {
  check().bias_grad(8192, 64, DType::kBF16);  // many row parts
  check().bias_grad(300, 96, DType::kBF16);
  check().bias_grad(77, 50, DType::kF32);   // n % 8 != 0
  check().bias_grad(77, 50, DType::kBF16);  // n % 8 != 0: the product's C 4-byte aligned
  check().bias_grad(4096, 1000, DType::kBF16);
  expect_all_pass();
}

TEST_F(CudaBackendTest, LayerNorm) {
  check().layernorm(64, 2048, DType::kBF16);
  check().layernorm(50, 96, DType::kBF16);
  check().layernorm(20, 100, DType::kBF16);  // h % 8 != 0
  check().layernorm(9, 3000, DType::kBF16);  // h > 2048
  check().layernorm(33, 256, DType::kF32);
  check().layernorm(1000, 512, DType::kBF16);
  expect_all_pass();
}

TEST_F(CudaBackendTest, Embeddings) {
  check().embedding(300, 50, 10, 64, DType::kBF16, false);
  check().embedding(100, 20, 0, 20, DType::kF32, false);  // h % 8 != 0
  check().embedding(257, 40, 5, 32, DType::kBF16, true);  // long runs of one id
  check().position_embedding(7, 3, 24, 16, 5, DType::kBF16);
  check().position_embedding(5, 2, 10, 5, 0, DType::kF32);
  expect_all_pass();
}

TEST_F(CudaBackendTest, CrossEntropy) {
  check().cross_entropy(37, 1000, 1000, 3000, DType::kBF16);
  check().cross_entropy(11, 1001, 0, 2002, DType::kBF16);  // cols % 8 != 0
  check().cross_entropy(13, 256, 256, 512, DType::kF32);
  // The fused kernel (each check also runs it, where the device has it): clusters of 2 and 8
  // CTAs, and a row too wide for it.
  check().cross_entropy(12, 32008, 0, 32008, DType::kBF16);
  check().cross_entropy(16, 128256, 0, 128256, DType::kBF16);
  check().cross_entropy(3, 131080, 0, 131080, DType::kBF16);
  expect_all_pass();
}

TEST_F(CudaBackendTest, SumsAndAdamW) {
  check().sums(100003);
  check().sums(5);
  check().sums(4 << 20);
  check().adamw(1003, true, 0.1f);
  check().adamw(4096, false, 0.0f);
  expect_all_pass();
}

TEST_F(CudaBackendTest, MemoryAccountingByTag) {
  CudaBackend& g = gpu();
  const MemoryStats before = g.memory_stats();
  Tensor a = g.alloc(DType::kBF16, {1000, 3}, "acts");
  Tensor b = g.alloc(DType::kF32, {250}, "grads");
  MemoryStats m = g.memory_stats();
  EXPECT_EQ(m.current_bytes - before.current_bytes, 1000 * 3 * 2 + 250 * 4);
  EXPECT_GE(m.peak_bytes, m.current_bytes);
  EXPECT_GT(m.device_peak_bytes, 0);
  EXPECT_EQ(g.memory_by_tag().at("acts").current_bytes, 6000);
  g.release(a);
  EXPECT_EQ(a.data, nullptr);
  m = g.memory_stats();
  EXPECT_EQ(m.current_bytes - before.current_bytes, 1000);
  EXPECT_EQ(g.memory_by_tag().at("acts").peak_bytes, 6000);
  g.reset_peak_memory();
  EXPECT_EQ(g.memory_stats().peak_bytes, g.memory_stats().current_bytes);
  g.release(b);
}

TEST_F(CudaBackendTest, EventsOrderWorkAcrossStreams) {
  CudaBackend& g = gpu();
  const int64_t n = 1 << 22;
  Tensor x = g.alloc(DType::kF32, {n}, "test");
  Tensor y = g.alloc(DType::kF32, {n}, "test");
  for (int i = 0; i < 3; ++i) {
    g.fill(x, static_cast<float>(i + 1));  // compute stream
    Event e = g.record(Stream::kCompute);
    g.wait(Stream::kComm, e);
    MPLAN_CUDA_CHECK(cudaMemcpyAsync(y.data, x.data, x.bytes(), cudaMemcpyDeviceToDevice,
                                     g.stream(Stream::kComm)));
    Event back = g.record(Stream::kComm);
    g.wait(Stream::kCompute, back);
    g.scale(y, 2.0f);  // compute stream, after the copy
    std::vector<float> host(static_cast<size_t>(n));
    g.download(host.data(), y);
    EXPECT_EQ(host.front(), 2.0f * static_cast<float>(i + 1));
    EXPECT_EQ(host.back(), 2.0f * static_cast<float>(i + 1));
  }
  g.release(x);
  g.release(y);
}

// A recorded graph runs nothing until replayed; each replay runs it again (work on the comm
// stream forked and joined by events included) and takes its marks again; a release of device
// memory after the recording makes the next replay refuse (and forget the graph).
TEST_F(CudaBackendTest, GraphsReplayRecordedWorkUntilMemoryIsReleased) {
  CudaBackend& g = gpu();
  const int64_t n = 1 << 20;
  Tensor x = g.alloc(DType::kF32, {n}, "test");
  Tensor y = g.alloc(DType::kF32, {n}, "test");
  Tensor spare = g.alloc(DType::kF32, {16}, "test");
  g.fill(x, 0.0f);
  g.fill(y, 1.0f);
  g.synchronize();
  ASSERT_TRUE(g.can_capture());
  g.clear_marks();
  g.begin_capture();
  const int m0 = g.mark(Stream::kCompute);
  g.add(x, x, y);  // x += 1
  Event e = g.record(Stream::kCompute);
  g.wait(Stream::kComm, e);
  MPLAN_CUDA_CHECK(cudaMemcpyAsync(y.data, x.data, x.bytes(), cudaMemcpyDeviceToDevice,
                                   g.stream(Stream::kComm)));  // y = x
  g.wait(Stream::kCompute, g.record(Stream::kComm));
  const int m1 = g.mark(Stream::kCompute);
  const int id = g.end_capture();
  ASSERT_GE(id, 0);
  std::vector<float> hx(static_cast<size_t>(n)), hy(static_cast<size_t>(n));
  g.download(hx.data(), x);
  EXPECT_EQ(hx.back(), 0.0f);  // recorded, not run
  // x, y: (1, 1), (2, 2), (4, 4).
  for (float want : {1.0f, 2.0f, 4.0f}) {
    g.reuse_marks(m1 + 1);
    ASSERT_TRUE(g.replay(id));
    g.synchronize();
    g.download(hx.data(), x);
    g.download(hy.data(), y);
    EXPECT_EQ(hx.front(), want);
    EXPECT_EQ(hx.back(), want);
    EXPECT_EQ(hy.back(), want);
    EXPECT_TRUE(g.mark_done(m0) && g.mark_done(m1));
    std::vector<int64_t> ns;
    g.read_marks(ns);
    ASSERT_EQ(ns.size(), static_cast<size_t>(m1 + 1));
    EXPECT_GT(ns[static_cast<size_t>(m1)], 0);  // the replay's own marks, in order
  }
  g.release(spare);
  EXPECT_FALSE(g.replay(id));
  g.synchronize();
  g.download(hx.data(), x);
  EXPECT_EQ(hx.back(), 4.0f);  // the refused replay ran nothing
  g.release(x);
  g.release(y);
}

TEST_F(CudaBackendTest, SecondStepAllocatesNothing) {
  // The scratch arena grows on first use; repeating the same ops must not allocate again.
  CudaBackend& g = gpu();
  const int64_t T = 512, h = 256, V = 1000;
  Tensor x = g.alloc(DType::kBF16, {T, h}, "test"), dy = g.alloc(DType::kBF16, {T, h}, "test");
  Tensor gamma = g.alloc(DType::kBF16, {h}, "test"), dx = g.alloc(DType::kBF16, {T, h}, "test");
  Tensor mean = g.alloc(DType::kF32, {T}, "test"), rstd = g.alloc(DType::kF32, {T}, "test");
  Tensor dg = g.alloc(DType::kF32, {h}, "test"), db = g.alloc(DType::kF32, {h}, "test");
  Tensor tok = g.alloc(DType::kI32, {T}, "test"), dwte = g.alloc(DType::kF32, {V, h}, "test");
  Tensor one = g.alloc(DType::kF32, {1}, "test");
  for (Tensor* t : {&x, &dy, &gamma}) g.fill(*t, 0.5f);
  g.fill(tok, 3.0f);
  auto step = [&] {
    g.layernorm_forward(x, gamma, gamma, 1e-5f, dx, mean, rstd);
    g.layernorm_backward(dy, x, gamma, mean, rstd, dx, dg, db);
    g.bias_grad_accumulate(dy, dg);
    g.embedding_backward(tok, dy, 0, dwte);
    g.sum_squares_accumulate(dwte, one);
    g.synchronize();
  };
  step();
  const int64_t after_first = g.memory_stats().current_bytes;
  step();
  EXPECT_EQ(g.memory_stats().current_bytes, after_first);
  for (Tensor* t : {&x, &dy, &gamma, &dx, &mean, &rstd, &dg, &db, &tok, &dwte, &one}) g.release(*t);
}

}  // namespace
}  // namespace mplan::exec::cuda::testing
