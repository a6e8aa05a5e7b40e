// Optimizer CPU offloading against hand-worked numbers on the dgx-h100 profile (PCIe 5.0 x16,
// 63.0 GB/s per direction; 614.4 GB/s of host memory for 8 GPUs).
#include "sim/cost/offload_cost.hpp"

#include <gtest/gtest.h>

#include "sim/cost/dp_sharding_memory.hpp"
#include "src/common/embedded_configs.hpp"

namespace mplan::cost {
namespace {

TEST(OffloadCost, OptimizerStepOnTheHost) {
  const ClusterSpec c = load_cluster("dgx-h100");
  TrainingConfig t;
  t.precision = Precision::kBf16;
  t.optimizer_precision.use_precision_aware_optimizer = true;  // fp32 master, m, v: 12 bytes
  // Off: the GPU's step alone.
  OffloadedOptimizerStep s = offloaded_optimizer_step(t, c, 1'000'000'000, 40'000'000);
  EXPECT_EQ(s.total_ns(), 40'000'000);
  EXPECT_EQ(optimizer_offload_fraction(t), 0.0);
  // Half of 10^9 owned parameters on the host: 5·10^8 fp32 gradients down and parameters up,
  // 2·10^9 bytes each way at 63 B/ns: 31746031.7 ns; Adam reads and writes 12 bytes of state and
  // reads 4 of gradient per parameter, 1.4·10^10 bytes at 614.4 / 8 = 76.8 B/ns: 182291666.7 ns;
  // the GPU's step over the other half: 20 ms.
  t.optimizer_cpu_offload = true;
  t.optimizer_offload_fraction = 0.5;
  s = offloaded_optimizer_step(t, c, 1'000'000'000, 40'000'000);
  EXPECT_EQ(s.gpu_ns, 20'000'000);
  EXPECT_EQ(s.d2h_ns, 31'746'032);
  EXPECT_EQ(s.h2d_ns, 31'746'032);
  EXPECT_EQ(s.host_ns, 182'291'667);
  EXPECT_EQ(s.total_ns(), 20'000'000 + 2 * 31'746'032 + 182'291'667);
  // The GPU keeps the other half of the optimizer state (12 bytes per parameter, no sharding).
  ParallelConfig p;
  EXPECT_EQ(sharded_model_state_bytes(t, p, 1'000'000, 1, 0, 1).optimizer, 6'000'000);
  t.optimizer_cpu_offload = false;
  EXPECT_EQ(sharded_model_state_bytes(t, p, 1'000'000, 1, 0, 1).optimizer, 12'000'000);
}

TEST(OffloadCost, ProfileWithoutHostNumbersUsesPcie4) {
  ClusterSpec c = load_cluster("dgx-h100");
  c.host_link_gbps = 0;
  c.host_memory_gbps = 0;
  TrainingConfig t;
  t.optimizer_cpu_offload = true;  // fraction 1
  t.optimizer_precision.use_precision_aware_optimizer = true;
  // 63·10^6 parameters: 2.52·10^8 bytes each way at 31.5 B/ns = 8 ms; Adam 1.764·10^9 bytes at
  // 409.6 / 8 = 51.2 B/ns = 34453125 ns; nothing left on the GPU.
  const OffloadedOptimizerStep s = offloaded_optimizer_step(t, c, 63'000'000, 5'000'000);
  EXPECT_EQ(s.gpu_ns, 0);
  EXPECT_EQ(s.d2h_ns, 8'000'000);
  EXPECT_EQ(s.h2d_ns, 8'000'000);
  EXPECT_EQ(s.host_ns, 34'453'125);
}

TEST(OffloadCost, OverlappedCopiesRunAsAPipeline) {
  // --overlap-cpu-optimizer-d2h-h2d: the numbers of OptimizerStepOnTheHost, bounded by the host's
  // Adam (182291667 ns) instead of their sum.
  const ClusterSpec c = load_cluster("dgx-h100");
  TrainingConfig t;
  t.optimizer_precision.use_precision_aware_optimizer = true;
  t.optimizer_cpu_offload = true;
  t.optimizer_offload_fraction = 0.5;
  t.overlap_cpu_optimizer_d2h_h2d = true;
  OffloadedOptimizerStep s = offloaded_optimizer_step(t, c, 1'000'000'000, 40'000'000);
  EXPECT_TRUE(s.overlapped);
  EXPECT_EQ(s.total_ns(), 182'291'667);
  // A fast host: the GPU's own step (20 ms) bounds it.
  ClusterSpec fast = c;
  fast.host_memory_gbps = 614.4 * 100;
  s = offloaded_optimizer_step(t, fast, 1'000'000'000, 40'000'000);
  EXPECT_EQ(s.d2h_ns, 31'746'032);  // the link, not the host memory, bounds the copies
  EXPECT_EQ(s.total_ns(), 31'746'032);
}

TEST(OffloadCost, ActivationCopiesHideBehindCompute) {
  // dgx-h100: min(63 B/ns link, 614.4 / 8 = 76.8 B/ns host memory) = 63 B/ns. 630 MB take 10 ms.
  ClusterSpec c = load_cluster("dgx-h100");
  EXPECT_DOUBLE_EQ(host_copy_bytes_per_ns(c), 63.0);
  EXPECT_EQ(exposed_host_copy_ns(c, 630e6, 4'000'000), 6'000'000);
  EXPECT_EQ(exposed_host_copy_ns(c, 630e6, 12'000'000), 0);
  // Host memory shared by 16 GPUs: 614.4 / 16 = 38.4 B/ns bounds the copy.
  c.gpus_per_node = 16;
  EXPECT_DOUBLE_EQ(host_copy_bytes_per_ns(c), 38.4);
  EXPECT_EQ(exposed_host_copy_ns(c, 384e6, 0), 10'000'000);
}

}  // namespace
}  // namespace mplan::cost
