// MpiComm and MpiCommWorld under mpirun (any world size; run with -np 1, 2 and 4): collectives
// give values computed by hand from each rank's contribution, bitwise the same on every rank,
// in f32 and bf16; groups split as Megatron's order tp-cp-ep-dp-pp puts them.
#include "exec/mpi/mpi_comm.hpp"

#include <gtest/gtest.h>

#include "exec/cpu/cpu_backend.hpp"
#include "exec/parallel/tp_dp_groups.hpp"
#include "tests/exec/support/test_tensors.hpp"

namespace mplan::exec {
namespace {

using testing::make;
using testing::read;

int world_size() {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

// True when `v` is bitwise the same on every rank of the world.
bool same_everywhere(const std::vector<float>& v) {
  std::vector<float> root = v;
  MPI_Bcast(root.data(), static_cast<int>(root.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);
  int same = std::memcmp(root.data(), v.data(), v.size() * sizeof(float)) == 0, all = 0;
  MPI_Allreduce(&same, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all == 1;
}

class MpiCommTest : public ::testing::TestWithParam<DType> {
 protected:
  CpuBackend be;
  MpiComm world{MPI_COMM_WORLD};
};

TEST_P(MpiCommTest, AllReduceSumAndMax) {
  const int n = world.size(), r = world.rank();
  const int64_t len = 11;  // not a multiple of the world size: uneven blocks
  std::vector<float> v(len);
  for (int64_t i = 0; i < len; ++i) v[i] = static_cast<float>((r + 1) * (i + 1)) * 0.25f;
  Tensor t = make(be, GetParam(), {len}, v);
  world.all_reduce(t, ReduceOp::kSum, Stream::kCompute);
  auto got = read(be, t);
  for (int64_t i = 0; i < len; ++i)  // sum over r of (r + 1)(i + 1)/4 = n(n + 1)/2 · (i + 1)/4
    EXPECT_EQ(got[i], testing::rounded({n * (n + 1) / 2.0f * (i + 1) * 0.25f}, GetParam())[0]);
  EXPECT_TRUE(same_everywhere(got));
  Tensor m = make(be, GetParam(), {len}, v);
  world.all_reduce(m, ReduceOp::kMax, Stream::kComm);
  got = read(be, m);
  for (int64_t i = 0; i < len; ++i) EXPECT_EQ(got[i], n * (i + 1) * 0.25f);
}

TEST_P(MpiCommTest, AllReduceIsBitwiseIdenticalOnEveryRank) {
  auto v = testing::randn(1000, 7 + static_cast<uint32_t>(world.rank()));
  Tensor t = make(be, GetParam(), {1000}, v);
  world.all_reduce(t, ReduceOp::kSum, Stream::kCompute);
  EXPECT_TRUE(same_everywhere(read(be, t)));
}

TEST_P(MpiCommTest, AllGatherAndReduceScatter) {
  const int n = world.size(), r = world.rank();
  Tensor send = make(be, GetParam(), {2}, {static_cast<float>(r), static_cast<float>(10 + r)});
  Tensor recv = be.alloc(GetParam(), {n, 2}, "t");
  world.all_gather(send, recv, Stream::kCompute);
  auto g = read(be, recv);
  for (int k = 0; k < n; ++k) {
    EXPECT_EQ(g[2 * k], k);
    EXPECT_EQ(g[2 * k + 1], 10 + k);
  }
  // Rank r sends block k = (k + r, 1); block r summed over ranks = (n·r + n(n-1)/2, n).
  std::vector<float> blocks(2 * n);
  for (int k = 0; k < n; ++k) {
    blocks[2 * k] = static_cast<float>(k + r);
    blocks[2 * k + 1] = 1.0f;
  }
  Tensor rs_send = make(be, GetParam(), {n, 2}, blocks);
  Tensor rs_recv = be.alloc(GetParam(), {2}, "t");
  world.reduce_scatter(rs_send, rs_recv, Stream::kCompute);
  EXPECT_EQ(read(be, rs_recv), (std::vector<float>{static_cast<float>(n * r + n * (n - 1) / 2),
                                                   static_cast<float>(n)}));
}

TEST_P(MpiCommTest, BroadcastAndRingSendRecv) {
  const int n = world.size(), r = world.rank();
  Tensor b = make(be, GetParam(), {3}, {float(r), float(r), float(r)});
  world.broadcast(b, n - 1, Stream::kCompute);
  EXPECT_EQ(read(be, b), (std::vector<float>(3, static_cast<float>(n - 1))));
  if (n == 1) return;
  Tensor out = make(be, GetParam(), {2}, {float(r), float(2 * r)});
  Tensor in = be.alloc(GetParam(), {2}, "t");
  world.group_start();  // both directions at once: no ordering deadlock
  world.send(out, (r + 1) % n, Stream::kCompute);
  world.recv(in, (r + n - 1) % n, Stream::kCompute);
  world.group_end();
  int left = (r + n - 1) % n;
  EXPECT_EQ(read(be, in), (std::vector<float>{float(left), float(2 * left)}));
}

INSTANTIATE_TEST_SUITE_P(Dtypes, MpiCommTest, ::testing::Values(DType::kF32, DType::kBF16),
                         [](const auto& info) { return std::string(to_string(info.param)); });

TEST(MpiCommWorld, SplitsTensorAndDataParallelGroupsInMegatronOrder) {
  const int n = world_size();
  for (int64_t tp : {1, 2, 4}) {
    if (n % tp != 0) continue;
    int64_t dp = n / tp;
    int me = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MpiCommWorld w(tp_dp_group_members(tp, dp, me));
    EXPECT_EQ(w.world_size(), n);
    CpuBackend be;
    for (const char* kind : {"tp", "dp", "tp-dp"}) {
      SCOPED_TRACE(::testing::Message() << "tp " << tp << " dp " << dp << " group " << kind);
      Comm& c = w.group(kind);
      // Everyone contributes its world rank; the gathered list is the group, in member order.
      Tensor send = make(be, DType::kF32, {1}, {static_cast<float>(me)});
      Tensor recv = be.alloc(DType::kF32, {c.size()}, "t");
      c.all_gather(send, recv, Stream::kCompute);
      std::vector<float> want;
      GroupMembers groups = tp_dp_group_members(tp, dp, me);
      for (int m : groups.at(kind)) want.push_back(static_cast<float>(m));
      EXPECT_EQ(read(be, recv), want);
    }
    EXPECT_THROW(w.group("pp"), InternalError);
  }
}

}  // namespace
}  // namespace mplan::exec
