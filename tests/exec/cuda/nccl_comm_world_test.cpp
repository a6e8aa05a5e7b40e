// NcclCommWorld under mpirun (one rank per GPU): the world communicator and one communicator per
// group kind, with each member's NCCL rank equal to its index in the group's member list. The
// layout is Megatron's for tp = 2 over the world (tp groups {0,1}, {2,3}; dp groups {0,2},
// {1,3}), listed in reverse member order once to show that the list order, not the world order,
// sets the group rank. Skips when there are fewer GPUs than ranks.
#include <vector>

#include "exec/cuda/nccl_comm.hpp"
#include "exec/mpi/mpi_runtime.hpp"
#include "tests/exec/cuda/gpu_test_support.hpp"

namespace mplan::exec::cuda::testing {
namespace {

TEST(NcclCommWorldTest, GroupsFollowTheMemberOrder) {
  MPLAN_REQUIRE_GPU();
  const ProcessIdentity id = query_identity();
  if (cuda_device_count() < id.local_size)
    GTEST_SKIP() << id.local_size << " ranks on this host but " << cuda_device_count() << " GPUs";
  if (id.world_size % 2 != 0) GTEST_SKIP() << "needs an even number of ranks";
  const int w = id.world_rank, n = id.world_size;
  GroupMembers groups;
  const int tp0 = w / 2 * 2;
  groups["tp"] = {tp0, tp0 + 1};
  std::vector<int> dp;
  for (int r = w % 2; r < n; r += 2) dp.push_back(r);
  groups["dp"] = dp;
  groups["tp-reversed"] = {tp0 + 1, tp0};
  CudaBackend be(id.local_rank);
  auto world = make_nccl_comm_world(groups, be);
  EXPECT_EQ(world->world_rank(), w);
  EXPECT_EQ(world->world_size(), n);
  EXPECT_EQ(world->group("tp").rank(), w % 2);
  EXPECT_EQ(world->group("tp").size(), 2);
  EXPECT_EQ(world->group("tp-reversed").rank(), 1 - w % 2);
  EXPECT_EQ(world->group("dp").rank(), w / 2);
  EXPECT_EQ(world->group("dp").size(), n / 2);

  // Sum of world ranks over each group, and an all-gather that lists the members in group order.
  Tensor t = be.alloc(DType::kF32, {4}, "test");
  std::vector<float> v(4, static_cast<float>(w));
  be.upload(t, v.data());
  world->group("dp").all_reduce(t, ReduceOp::kSum, Stream::kComm);
  be.synchronize();
  be.download(v.data(), t);
  float want = 0;
  for (int r : dp) want += static_cast<float>(r);
  EXPECT_EQ(v[0], want);
  EXPECT_EQ(v[3], want);

  Tensor one = be.alloc(DType::kF32, {1}, "test");
  Tensor all = be.alloc(DType::kF32, {2}, "test");
  const float me = static_cast<float>(w);
  be.upload(one, &me);
  world->group("tp-reversed").all_gather(one, all, Stream::kCompute);
  float got[2];
  be.download(got, all);
  EXPECT_EQ(got[0], static_cast<float>(tp0 + 1));
  EXPECT_EQ(got[1], static_cast<float>(tp0));
  for (Tensor* x : {&t, &one, &all}) be.release(*x);
}

}  // namespace
}  // namespace mplan::exec::cuda::testing
