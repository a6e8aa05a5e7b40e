// Collective time α + S·f(n)/busbw with nccl-tests bus factors; rings across nodes; NIC
// sharing. Expected values worked out by hand on a cluster with flat (size-independent) curves.
#include "sim/cost/collective_cost.hpp"

#include <gtest/gtest.h>

#include "src/common/error.hpp"

namespace mplan::cost {
namespace {

// 8 GPUs and 8 NICs per node. NVLink: α 10 us, all-reduce 200 GB/s, all-gather 150, all-to-all
// 100, send/recv 250. Network (per GPU, one GPU per node): α 20 us, 20 / 20 / 10 / 25 GB/s.
ClusterSpec flat_cluster() {
  ClusterSpec c;
  c.name = "flat";
  c.gpus_per_node = 8;
  c.nics_per_node = 8;
  c.intra_node = {"nvlink", 10, {{1, 200}}, {{1, 150}}, {{1, 100}}, {{1, 250}}};
  c.inter_node = {"ib", 20, {{1, 20}}, {{1, 20}}, {{1, 10}}, {{1, 25}}};
  return c;
}

constexpr double kGiB = 1024.0 * 1024 * 1024;
constexpr double kMiB = 1024.0 * 1024;

TEST(CollectiveCost, BusFactorsOfNcclTests) {
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveKind::kAllReduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveKind::kAllReduce, 2), 1.0);
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveKind::kAllGather, 8), 0.875);
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveKind::kReduceScatter, 2), 0.5);
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveKind::kAllToAll, 4), 0.75);
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveKind::kSendRecv, 2), 1.0);
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveKind::kAllReduce, 1), 0.0);
}

TEST(CollectiveCost, RingAllReduceInsideANode) {
  // 8 GPUs, 1 GiB: each GPU sends and receives 2 (n-1)/n · S = 1.75 GiB at 200 GB/s:
  // 10 us + 1879048192 / 2e11 s = 10 us + 9395240.96 ns.
  EXPECT_EQ(collective_time_ns(flat_cluster(), CollectiveKind::kAllReduce, kGiB, {8, 1, 8}),
            9405241);
  // 2 GPUs: (n-1)/n · 2 = 1: 10 us + 2^30 / 2e11 s.
  EXPECT_EQ(collective_time_ns(flat_cluster(), CollectiveKind::kAllReduce, kGiB, {2, 1, 2}),
            5368709 + 10000);  // 5368709.12 + 10000
}

TEST(CollectiveCost, AllGatherAndReduceScatterInsideANode) {
  // 4 GPUs, 64 MiB gathered: 0.75 · 67108864 / 1.5e11 s = 335544.32 ns, + 10 us.
  EXPECT_EQ(collective_time_ns(flat_cluster(), CollectiveKind::kAllGather, 64 * kMiB, {4, 1, 4}),
            345544);
  EXPECT_EQ(
      collective_time_ns(flat_cluster(), CollectiveKind::kReduceScatter, 64 * kMiB, {4, 1, 4}),
      345544);
}

TEST(CollectiveCost, AllReduceAcrossNodesIsBoundByTheSlowerPhase) {
  // 4 nodes × 8 GPUs, 1 GiB. NVLink phase: 1.75 · 2^30 / 2e11 = 9395240.96 ns. Network phase:
  // the rings over all 32 ranks move the per-rank volume f(32) · S = 1.9375 · S through each
  // node's 8 NICs: 1.9375 · 2^27 / 2e10 = 13002342.4 ns. α = 20 + 10 us. Total 13032342.4 ns.
  ClusterSpec c = flat_cluster();
  EXPECT_EQ(collective_time_ns(c, CollectiveKind::kAllReduce, kGiB, {32, 4, 8}), 13032342);
  // Half as many NICs: every GPU gets half a NIC; the network phase doubles.
  c.nics_per_node = 4;
  EXPECT_DOUBLE_EQ(nic_share_per_gpu(c), 0.5);
  EXPECT_EQ(collective_time_ns(c, CollectiveKind::kAllReduce, kGiB, {32, 4, 8}), 26034685);
}

TEST(CollectiveCost, TensorParallelAcrossNodesRunsAtTheNodesNics) {
  // tp 8 with sequence parallelism, a 128 MiB all-reduce. On one 8-GPU node: 1.75 · 2^27 / 2e11
  // = 1174405.12 ns + 10 us. On two 4-GPU nodes (4 NICs each): NVLink f(4) · S = 1.5 · 2^27 /
  // 2e11 = 1006632.96 ns; network f(8) · S / (4 NICs · 20 GB/s) = 1.75 · 2^25 / 2e10 =
  // 2936012.8 ns; α 30 us: 2.5 × the single node.
  ClusterSpec one = flat_cluster();
  EXPECT_EQ(collective_time_ns(one, CollectiveKind::kAllReduce, 128 * kMiB, {8, 1, 8}), 1184405);
  ClusterSpec four = flat_cluster();
  four.gpus_per_node = 4;
  four.nics_per_node = 4;
  EXPECT_EQ(collective_time_ns(four, CollectiveKind::kAllReduce, 128 * kMiB, {8, 2, 4}), 2966013);
}

TEST(CollectiveCost, OneGpuPerNodeRunsAtTheNetworkCurve) {
  // Data-parallel group of 4 GPUs on 4 nodes, 256 MiB: 1.5 · 2^28 / 2e10 s + 20 us.
  EXPECT_EQ(collective_time_ns(flat_cluster(), CollectiveKind::kAllReduce, 256 * kMiB, {4, 4, 1}),
            20152659);  // 20132659.2 + 20000
}

TEST(CollectiveCost, AllToAllAcrossNodesCountsWhatLeavesTheNode) {
  // 2 nodes × 4 GPUs, each GPU's 128 MiB buffer: 3/8 of it over NVLink (at 100 GB/s:
  // 503316.48 ns), 4/8 through its NIC (at 10 GB/s: 6710886.4 ns). α 30 us.
  EXPECT_EQ(collective_time_ns(flat_cluster(), CollectiveKind::kAllToAll, 128 * kMiB, {8, 2, 4}),
            6740886);
}

TEST(CollectiveCost, SendRecvInsideAndAcrossNodes) {
  // 64 MiB: 10 us + 2^26 / 2.5e11 s = 278435.456 ns; across nodes 20 us + 2^26 / 2.5e10 s.
  EXPECT_EQ(p2p_time_ns(flat_cluster(), 64 * kMiB, true), 278435);
  EXPECT_EQ(p2p_time_ns(flat_cluster(), 64 * kMiB, false), 2704355);
  EXPECT_EQ(collective_time_ns(flat_cluster(), CollectiveKind::kSendRecv, 64 * kMiB, {2, 2, 1}),
            2704355);
}

TEST(CollectiveCost, BandwidthDependsOnMessageSize) {
  // All-reduce curve 100 GB/s at 1 MiB, 400 at 1 GiB, linear in log2(size): 32 MiB is half way,
  // 250 GB/s. Two GPUs: 10 us + 2^25 / 2.5e11 s = 10 us + 134217.728 ns.
  ClusterSpec c = flat_cluster();
  c.intra_node.allreduce_busbw_gbps = {{kMiB, 100}, {kGiB, 400}};
  EXPECT_EQ(collective_time_ns(c, CollectiveKind::kAllReduce, 32 * kMiB, {2, 1, 2}), 144218);
  // A missing all-gather curve falls back to the all-reduce one.
  c.intra_node.allgather_busbw_gbps.clear();
  EXPECT_EQ(collective_time_ns(c, CollectiveKind::kAllGather, 32 * kMiB, {2, 1, 2}),
            10000 + 67109);  // 0.5 · 2^25 / 2.5e11 s = 67108.864 ns
}

TEST(CollectiveCost, NothingToDo) {
  EXPECT_EQ(collective_time_ns(flat_cluster(), CollectiveKind::kAllReduce, kGiB, {1, 1, 1}), 0);
  EXPECT_EQ(collective_time_ns(flat_cluster(), CollectiveKind::kAllReduce, 0, {8, 1, 8}), 0);
}

TEST(CollectiveCost, GroupSpanningNodesWithoutANetworkIsAUserError) {
  ClusterSpec c = flat_cluster();
  c.inter_node = LinkSpec{};
  EXPECT_THROW(collective_time_ns(c, CollectiveKind::kAllReduce, kGiB, {16, 2, 8}), Error);
}

TEST(CollectiveCost, UnevenGroupsAreCostedByTheirSlowestMember) {
  // 3 GPUs over 2 nodes (2 + 1), 1 GiB all-reduce. NVLink phase on the node of 2: f(2) = 1,
  // 2^30 / 2e11 = 5368709.12 ns. Network phase: the ring's f(3) = 4/3 of S carried by the lone
  // GPU: 4/3 · 2^30 / 2e10 = 71582788.27 ns. α 20 + 10 us.
  const GroupPlacement g{3, 2, 2, 1};
  EXPECT_FALSE(g.even());
  EXPECT_EQ(g.fewest_per_node(), 1);
  EXPECT_EQ(collective_time_ns(flat_cluster(), CollectiveKind::kAllReduce, kGiB, g), 71612788);
  // Never faster than the pair of one GPU per node, whose network slice is the same.
  const int64_t one_per_node =
      collective_time_ns(flat_cluster(), CollectiveKind::kAllReduce, kGiB, {2, 2, 1});
  EXPECT_GE(collective_time_ns(flat_cluster(), CollectiveKind::kAllReduce, kGiB, g), one_per_node);
  // All-to-all of 6 GPUs as 4 + 2, 96 MiB: NVLink 3/6 · S at 100 GB/s = 503316.48 ns; network
  // (6 - 2)/6 · S at 10 GB/s = 6710886.4 ns; α 30 us.
  EXPECT_EQ(collective_time_ns(flat_cluster(), CollectiveKind::kAllToAll, 96 * kMiB, {6, 2, 4, 2}),
            6740886);
}

// Bus bandwidth the model predicts, as nccl-tests computes it: S · f(n) / t.
double predicted_busbw_gbps(const ClusterSpec& c, CollectiveKind k, double bytes, int64_t n) {
  return bytes * bus_factor(k, n) / static_cast<double>(collective_time_ns(c, k, bytes, {n, 1, n}));
}

TEST(CollectiveCost, H200x4ProfileReproducesTheAnchors) {
  // shared/anchors/README.md, NCCL on 4 x H200: all-reduce busbw 87 (1 MiB), 267 (16 MiB), 340
  // (256 MiB), 357 (1 GiB) GB/s; all-gather / reduce-scatter 195 / 217 at 16 MiB, 327 / 323 at
  // 1 GiB; send/recv 358-360 GB/s at 256 MiB.
  const ClusterSpec c = load_cluster("h200x4");
  const CollectiveKind ar = CollectiveKind::kAllReduce;
  EXPECT_NEAR(predicted_busbw_gbps(c, ar, kMiB, 4), 87, 1);
  EXPECT_NEAR(predicted_busbw_gbps(c, ar, 16 * kMiB, 4), 267, 2);
  EXPECT_NEAR(predicted_busbw_gbps(c, ar, 256 * kMiB, 4), 340, 2);
  EXPECT_NEAR(predicted_busbw_gbps(c, ar, kGiB, 4), 357, 2);
  for (CollectiveKind k : {CollectiveKind::kAllGather, CollectiveKind::kReduceScatter}) {
    EXPECT_GE(predicted_busbw_gbps(c, k, 16 * kMiB, 4), 195);
    EXPECT_LE(predicted_busbw_gbps(c, k, 16 * kMiB, 4), 217);
    EXPECT_GE(predicted_busbw_gbps(c, k, kGiB, 4), 322);
    EXPECT_LE(predicted_busbw_gbps(c, k, kGiB, 4), 328);
  }
  const double p2p = 256 * kMiB / static_cast<double>(p2p_time_ns(c, 256 * kMiB, true));
  EXPECT_GE(p2p, 357);
  EXPECT_LE(p2p, 361);
}

}  // namespace
}  // namespace mplan::cost
