// ClusterSpec: the nodes a plan runs on and the hardware profile the simulator costs it with
// (GPU rates and memory, NVLink inside a node, the network between nodes), with optional
// per-implementation efficiency sets, validation residuals and raw calibration data. Invariant
// after parse: rates and sizes are positive, every curve is sorted by its x value, and each
// implementation set is a complete GpuSpec (the base one with the set's fields in place).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "src/common/json_reader.hpp"
#include "src/plan/implementation.hpp"

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

// The pass of a linear layer a GEMM belongs to: the operands' layout and the epilogue differ
// (forward x·Wᵀ, with a fused bias + GeLU epilogue or not; input gradient dy·W, with GeLU's
// backward fused into its epilogue or not (reading the saved pre-activation); weight gradient
// dyᵀ·x accumulated into fp32). Profile spelling: "fwd", "fwd_gelu", "dx", "dx_dgelu", "dw".
enum class GemmPass : uint8_t { kForward, kForwardGelu, kInputGrad, kInputGradDGelu, kWeightGrad };
const char* to_string(GemmPass p);

// A measured GEMM: C (m, n) = A (m, k) · B (k, n) of `pass` ran at `efficiency` of peak.
struct GemmPoint {
  int64_t m = 0, n = 0, k = 0;
  GemmPass pass = GemmPass::kForward;
  double efficiency = 0;
  bool operator==(const GemmPoint&) const = default;
};

// A measured causal attention call (flash-style, one GPU's heads): forward and backward
// efficiency over their own FLOPs (docs/cost-model.md).
struct AttentionPoint {
  int64_t batch = 0, heads = 0, seq = 0, head_dim = 0;
  double forward_efficiency = 0, backward_efficiency = 0;
  bool operator==(const AttentionPoint&) const = default;
};

// Memory-bound kernel kinds with a rate of their own in a profile (memory_bound_kinds). The
// bytes each kind moves are defined once, in sim/cost/memory_bound_cost.hpp; the profile names
// are to_string's.
enum class MemKernel : uint8_t {
  kCopy,
  kAdd,
  kLayerNormForward,
  kLayerNormBackward,  // with the residual-gradient add (layernorm_backward_add)
  kRmsNormForward,
  kRmsNormBackward,  // with the residual-gradient add
  kGeluForward,
  kGeluBackward,
  kSwigluForward,
  kSwigluBackward,
  kBiasGrad,
  kRope,
  kEmbeddingForward,
  kEmbeddingBackward,
  kPositionEmbeddingBackward,
  kCrossEntropy,  // the three vocabulary-parallel steps of one micro-batch's loss and gradient
  kAdamW,
  kGradNorm,  // sum of squares of the fp32 gradients
  kFill,      // zeroing the fp32 gradients
};
inline constexpr int kNumMemKernels = static_cast<int>(MemKernel::kFill) + 1;
const char* to_string(MemKernel k);
std::optional<MemKernel> mem_kernel_from(const std::string& name);

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
  // Optional refinements (docs/cost-model.md; absent: the curves above alone, as before).
  // Measured GEMMs: a GEMM of a measured shape and pass takes its efficiency; one near it (within
  // one octave per dimension) moves its curve value towards it.
  std::vector<GemmPoint> gemm_shapes;
  // Measured attention calls, used the same way over (batch·heads, sequence, head dim).
  std::vector<AttentionPoint> attention_shapes;
  // Achieved fraction of hbm bandwidth per kernel kind, as a curve over the bytes the kind moves;
  // an empty curve: memory_bound_efficiency over the cost model's pass counts.
  std::array<Curve, kNumMemKernels> memory_bound_kinds{};
  // Row-wise kinds (the norms) measured at several row widths: (width, curve) pairs in
  // increasing width; a kernel takes the curve of the width nearest its own (in octaves). Empty:
  // memory_bound_kinds alone.
  std::array<std::vector<std::pair<int64_t, Curve>>, kNumMemKernels> memory_bound_widths{};
  double kernel_overhead_us = 0;  // the least time of a kernel in a stream (a tiny kernel
                                  // back to back; sim/cost/kernel_overhead.hpp)
  double kernel_min_us = 0;       // a tiny kernel alone between two events (recorded only)
  double host_overhead_us = 0;    // host time to issue one kernel (recorded only: the host runs
                                  // ahead of the executor's kernels)
  double overlap_slowdown = 0;    // a kernel runs this much slower while a collective runs beside
                                  // it on another stream (over the overlapped time)
  // The power limit (docs/cost-model.md, "GEMMs under the power limit"): the fraction of peak one
  // large GEMM holds back to back (mplan calibrate's sustained load; 0: not measured), and how
  // far a GEMM that runs faster when timed alone slows toward it in training, where lighter
  // kernels between the GEMMs leave the clock between the GEMM-only and the boost clock: its
  // efficiency e becomes e - sustained_gemm_weight · (e - sustained_gemm_efficiency).
  double sustained_gemm_efficiency = 0;
  double sustained_gemm_weight = 0.5;
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

// Relative errors (predicted − measured) / measured of predictions against measured runs; the
// uncertainty band printed beside a prediction comes from them (sim/calibration).
struct Validation {
  std::string source;     // where the runs are reported
  bool in_sample = true;  // the profile was fitted to these runs
  std::vector<double> time_errors;
  std::vector<double> memory_errors;
  bool operator==(const Validation&) const = default;
};

struct ClusterSpec {
  std::string name;
  int64_t num_nodes = 0;  // size of the cluster; 0 = as many nodes as a plan needs
  int64_t gpus_per_node = 0;
  GpuSpec gpu;
  LinkSpec intra_node;        // inside one node (NVLink / NVSwitch)
  LinkSpec inter_node;        // between nodes (InfiniBand / RoCE); empty name: none
  int64_t nics_per_node = 0;  // network adapters per node (0: one per GPU)
  // The host side, for offloading (docs/cost-model.md, "Optimizer offloading"): each GPU's link
  // to the host in one direction (PCIe or NVLink-C2C), and the node's host memory bandwidth,
  // 10^9 B/s; 0: the defaults below.
  double host_link_gbps = 0;
  double host_memory_gbps = 0;
  // Efficiency sets per implementation ("implementations" in the profile): the base gpu with the
  // set's fields in place; none: the base gpu serves that implementation.
  std::array<std::optional<GpuSpec>, kNumImplementations> implementations{};
  // Prediction errors per implementation ("validation" in the profile).
  std::array<std::optional<Validation>, kNumImplementations> validation{};
  Json calibration;  // raw measurements and their provenance (mplan calibrate); null: none
  bool operator==(const ClusterSpec&) const = default;
  // The GPU numbers the simulator uses for a plan run by `impl`.
  const GpuSpec& gpu_for(Implementation impl) const {
    const auto& set = implementations[static_cast<size_t>(impl)];
    return set ? *set : gpu;
  }
  const Validation* validation_for(Implementation impl) const {
    const auto& v = validation[static_cast<size_t>(impl)];
    return v ? &*v : nullptr;
  }
  bool has_inter_node() const { return !inter_node.name.empty(); }
  double host_link() const;    // host_link_gbps, or kDefaultHostLinkGbps
  double host_memory() const;  // host_memory_gbps, or kDefaultHostMemoryGbps
  int64_t nics() const { return nics_per_node > 0 ? nics_per_node : gpus_per_node; }
};

// Defaults of a profile that gives no host numbers. PCIe 4.0 x16 (the link of every GPU since the
// A100): 16 GT/s x 16 lanes x 128/130 encoding / 8 = 31.5 GB/s per direction (PCI-SIG, PCI
// Express Base Specification 4.0). Host memory of a DGX A100: two AMD EPYC 7742, each with eight
// DDR4-3200 channels of 25.6 GB/s: 409.6 GB/s (NVIDIA DGX A100 datasheet; AMD EPYC 7742 specs).
inline constexpr double kDefaultHostLinkGbps = 31.5;
inline constexpr double kDefaultHostMemoryGbps = 409.6;

ClusterSpec cluster_from_json(const Json& j, const std::string& path);
Json cluster_to_json(const ClusterSpec& c);
// The "gpu" object alone (every field), and back; `path` names it in errors.
Json gpu_to_json(const GpuSpec& g);
GpuSpec gpu_from_json(const Json& j, const std::string& path);
ClusterSpec load_cluster(const std::string& ref, const std::string& field = "cluster");

}  // namespace mplan
