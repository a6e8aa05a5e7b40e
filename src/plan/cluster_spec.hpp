// ClusterSpec: the nodes a plan runs on and the hardware profile the simulator costs it with
// (GPU rates and memory, NVLink inside a node, the network between nodes). Invariant after
// parse: rates and sizes are positive and every curve is sorted by its x value.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "src/common/json_reader.hpp"

namespace mplan {

// One point of a piecewise-linear curve (interpolated in log2(x), clamped at the ends).
struct CurvePoint {
  double x = 0;
  double y = 0;
  bool operator==(const CurvePoint&) const = default;
};
using Curve = std::vector<CurvePoint>;

// y at x: linear in log2(x) between points, the end values outside. Empty curve: `fallback`.
double curve_at(const Curve& c, double x, double fallback);

struct GpuSpec {
  std::string name;
  double memory_gib = 0;                 // usable device memory, GiB (2^30 bytes)
  double peak_bf16_tflops = 0;           // dense bf16 tensor-core peak, 10^12 FLOP/s (datasheet)
  double hbm_bandwidth_gbps = 0;         // device memory bandwidth, 10^9 B/s
  double memory_bound_efficiency = 0.8;  // achieved fraction of hbm bandwidth for elementwise ops
  // Achieved fraction of peak for a bf16 GEMM, as a curve over its FLOPs (2·m·n·k).
  Curve gemm_efficiency;
  // Achieved fraction of peak for flash-style attention, over the FLOPs of one call (forward
  // FLOPs 4·b·heads·s_q·s_k·d, halved when causal).
  Curve attention_efficiency;
  // The same for the backward pass (2.5 × the forward FLOPs); empty: attention_efficiency.
  Curve attention_backward_efficiency;
  double runtime_overhead_gib = 0;  // CUDA context, NCCL and allocator overhead per GPU, GiB
  // Low precision (src/plan/low_precision): dense tensor-core peaks, 10^12 FLOP/s (datasheet;
  // 0: the GPU has no such tensor cores), and the CUDA compute capability (major.minor: 8.0
  // Ampere, 8.9 Ada, 9.0 Hopper, 10.0 Blackwell; 0: not given) that decides which Transformer
  // Engine recipes run on it. The GEMM efficiency curve applies to each precision's peak.
  double peak_fp8_tflops = 0;
  double peak_fp4_tflops = 0;
  double compute_capability = 0;
  bool operator==(const GpuSpec&) const = default;
  int64_t memory_bytes() const;
};

// A link class. A collective of S bytes over it takes α + S·f(n)/busbw(S) (sim/cost): the curves
// are nccl-tests bus bandwidths over the nccl-tests size S, net of α (so that the formula gives the
// measured time). Inside a node they are for a group of GPUs of that node; between nodes, for a
// group of one GPU per node using its share of the node's network adapters.
struct LinkSpec {
  std::string name;
  double latency_us = 0;  // per-collective fixed cost α, microseconds
  // Bus bandwidth (10^9 B/s) over message size (bytes), per collective kind.
  Curve allreduce_busbw_gbps;
  Curve allgather_busbw_gbps;  // also used for reduce-scatter; empty: all-reduce's
  Curve alltoall_busbw_gbps;   // empty: all-reduce's
  Curve p2p_gbps;              // send/recv between two GPUs; empty: all-reduce's
  bool operator==(const LinkSpec&) const = default;
};

struct ClusterSpec {
  std::string name;
  int64_t num_nodes = 0;  // size of the cluster; 0 = as many nodes as a plan needs
  int64_t gpus_per_node = 0;
  GpuSpec gpu;
  LinkSpec intra_node;        // inside one node (NVLink / NVSwitch)
  LinkSpec inter_node;        // between nodes (InfiniBand / RoCE); empty name: none
  int64_t nics_per_node = 0;  // network adapters per node (0: one per GPU)
  bool operator==(const ClusterSpec&) const = default;
  bool has_inter_node() const { return !inter_node.name.empty(); }
  int64_t nics() const { return nics_per_node > 0 ? nics_per_node : gpus_per_node; }
};

ClusterSpec cluster_from_json(const Json& j, const std::string& path);
Json cluster_to_json(const ClusterSpec& c);
ClusterSpec load_cluster(const std::string& ref, const std::string& field = "cluster");

}  // namespace mplan
