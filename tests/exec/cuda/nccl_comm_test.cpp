// NcclComm between the visible GPUs of one process, one thread per GPU (no MPI): all-reduce
// (sum, max), all-gather, reduce-scatter, broadcast and a grouped send/recv ring, in f32 and
// bf16, on the compute and the comm stream, checked against values computed here by hand.
// Values are small integers, exact in bf16, so every expected result is exact.
#include <nccl.h>

#include <thread>
#include <vector>

#include "exec/cuda/cuda_check.hpp"
#include "exec/cuda/nccl_comm.hpp"
#include "exec/host_values.hpp"
#include "tests/exec/cuda/gpu_test_support.hpp"

namespace mplan::exec::cuda::testing {
namespace {

// Expects got[i] == want(i) for every i; reports the count and the first mismatch. (EXPECT, not
// ASSERT: a rank that returned early would leave its peers waiting in the next collective.)
template <class F>
void expect_values(const std::vector<float>& got, F want, const std::string& what) {
  int64_t bad = 0, first = -1;
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want(static_cast<int64_t>(i))) {
      if (bad++ == 0) first = static_cast<int64_t>(i);
    }
  }
  EXPECT_EQ(bad, 0) << what << ": first mismatch at " << first << ": got "
                    << (first >= 0 ? got[static_cast<size_t>(first)] : 0.0f) << ", expected "
                    << (first >= 0 ? want(first) : 0.0f);
}

// The collectives one rank runs and checks; n ranks run it at once, in the same order.
void rank_main(int rank, int n, ncclUniqueId id) {
  CudaBackend be(rank);
  ncclComm_t raw = nullptr;
  MPLAN_NCCL_CHECK(ncclCommInitRank(&raw, n, id, rank));
  NcclComm comm(raw, be);
  EXPECT_EQ(comm.rank(), rank);
  EXPECT_EQ(comm.size(), n);
  const int64_t len = 1000;
  for (DType dt : {DType::kF32, DType::kBF16}) {
    for (Stream st : {Stream::kCompute, Stream::kComm}) {
      const std::string what =
          std::string(to_string(dt)) + (st == Stream::kComm ? " comm" : " compute");
      // all-reduce sum: rank r holds (r + 1)·(i % 7).
      Tensor t = be.alloc(dt, {len}, "test");
      std::vector<float> v(static_cast<size_t>(len));
      for (int64_t i = 0; i < len; ++i)
        v[static_cast<size_t>(i)] = static_cast<float>((rank + 1) * (i % 7));
      upload_values(be, t, v);
      comm.all_reduce(t, ReduceOp::kSum, st);
      be.synchronize();
      const int tri = n * (n + 1) / 2;
      expect_values(
          download_values(be, t), [&](int64_t i) { return static_cast<float>(tri * (i % 7)); },
          what + " all_reduce sum");
      // all-reduce max: rank r holds r - (i % 5).
      for (int64_t i = 0; i < len; ++i)
        v[static_cast<size_t>(i)] = static_cast<float>(rank - i % 5);
      upload_values(be, t, v);
      comm.all_reduce(t, ReduceOp::kMax, st);
      be.synchronize();
      expect_values(
          download_values(be, t), [&](int64_t i) { return static_cast<float>(n - 1 - i % 5); },
          what + " all_reduce max");
      // all-gather: rank r sends r·16 + i (i < 10) -> recv block r.
      Tensor send = be.alloc(dt, {10}, "test");
      Tensor recv = be.alloc(dt, {10 * n}, "test");
      std::vector<float> sv(10);
      for (int i = 0; i < 10; ++i) sv[static_cast<size_t>(i)] = static_cast<float>(rank * 16 + i);
      upload_values(be, send, sv);
      comm.all_gather(send, recv, st);
      be.synchronize();
      expect_values(
          download_values(be, recv),
          [](int64_t j) { return static_cast<float>(j / 10 * 16 + j % 10); }, what + " all_gather");
      // reduce-scatter: every rank sends (j % 20) + rank for j < 10·n -> block `rank` summed.
      std::vector<float> rv(static_cast<size_t>(10 * n));
      for (int j = 0; j < 10 * n; ++j)
        rv[static_cast<size_t>(j)] = static_cast<float>(j % 20 + rank);
      upload_values(be, recv, rv);
      comm.reduce_scatter(recv, send, st);
      be.synchronize();
      expect_values(
          download_values(be, send),
          [&](int64_t i) {
            return static_cast<float>(n * ((rank * 10 + i) % 20) + n * (n - 1) / 2);
          },
          what + " reduce_scatter");
      // broadcast from the last rank.
      for (int64_t i = 0; i < len; ++i)
        v[static_cast<size_t>(i)] = static_cast<float>(rank * 3 + i % 11);
      upload_values(be, t, v);
      comm.broadcast(t, n - 1, st);
      be.synchronize();
      expect_values(
          download_values(be, t),
          [&](int64_t i) { return static_cast<float>((n - 1) * 3 + i % 11); }, what + " broadcast");
      // A ring: send to rank + 1, receive from rank - 1, grouped.
      for (int i = 0; i < 10; ++i) sv[static_cast<size_t>(i)] = static_cast<float>(rank * 10 + i);
      upload_values(be, send, sv);
      Tensor in = be.alloc(dt, {10}, "test");
      comm.group_start();
      comm.send(send, (rank + 1) % n, st);
      comm.recv(in, (rank + n - 1) % n, st);
      comm.group_end();
      be.synchronize();
      const int from = (rank + n - 1) % n;
      expect_values(
          download_values(be, in), [&](int64_t i) { return static_cast<float>(from * 10 + i); },
          what + " send/recv ring");
      for (Tensor* x : {&t, &send, &recv, &in}) be.release(*x);
    }
  }
}

TEST(NcclCommTest, CollectivesBetweenThreadsOnEveryVisibleGpu) {
  MPLAN_REQUIRE_GPU();
  const int n = cuda_device_count();
  if (n < 2) GTEST_SKIP() << "one CUDA device visible: NCCL collectives need two";
  disable_nvls_unless_set();
  ncclUniqueId id{};
  MPLAN_NCCL_CHECK(ncclGetUniqueId(&id));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back(rank_main, r, n, id);
  for (auto& t : threads) t.join();
}

}  // namespace
}  // namespace mplan::exec::cuda::testing
