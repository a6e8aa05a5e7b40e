// Collective cost. Sources:
// - Bus bandwidth and bus factors: NVIDIA/nccl-tests doc/PERFORMANCE.md (busbw = algbw·f(n),
//   so t = S·f(n)/busbw for a collective that runs at the bus bandwidth).
// - α + S/B form: the same document ("time ... roughly equal to overhead + size / bw"); Hockney's
//   latency-bandwidth model. Profiles store the bandwidth term net of α (see docs/cost-model.md).
// - Across nodes, two phases (NVLink inside each node, the network between nodes) that pipeline,
//   so the slower bounds the time. Ring volumes: Thakur, Rabenseifner, Gropp, "Optimization of
//   Collective Communication Operations in MPICH", IJHPCA 2005 ((n-1)/n·S per rank for
//   reduce-scatter and all-gather, twice that for all-reduce). NCCL's rings span all n ranks, one
//   ring per channel, each crossing every node boundary once (NVIDIA/nccl, src/graph/rings.cc and
//   the "NCCL: Accelerated Multi-GPU Collective Communications" talk): per node the network
//   carries the per-rank ring volume f(n)·S, spread over the node's group members' NICs.
#include "sim/cost/collective_cost.hpp"

#include <algorithm>
#include <limits>

#include "sim/cost/time_ns.hpp"
#include "src/common/error.hpp"
#include "src/common/units.hpp"

namespace mplan::cost {

const char* to_string(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::kAllReduce:
      return "all-reduce";
    case CollectiveKind::kAllGather:
      return "all-gather";
    case CollectiveKind::kReduceScatter:
      return "reduce-scatter";
    case CollectiveKind::kAllToAll:
      return "all-to-all";
    case CollectiveKind::kSendRecv:
      return "send/recv";
  }
  return "?";
}

double bus_factor(CollectiveKind k, int64_t n) {
  MPLAN_CHECK(n >= 1, "group size ", n);
  const double nn = static_cast<double>(n);
  switch (k) {
    case CollectiveKind::kAllReduce:
      return 2.0 * (nn - 1) / nn;
    case CollectiveKind::kAllGather:
    case CollectiveKind::kReduceScatter:
    case CollectiveKind::kAllToAll:
      return (nn - 1) / nn;
    case CollectiveKind::kSendRecv:
      return 1.0;
  }
  return 1.0;
}

double nic_share_per_gpu(const ClusterSpec& c) {
  MPLAN_CHECK(c.gpus_per_node >= 1, "gpus_per_node ", c.gpus_per_node);
  return std::min(1.0, static_cast<double>(c.nics()) / static_cast<double>(c.gpus_per_node));
}

namespace {

// The busbw curve of a link for a collective kind (all-gather's serves reduce-scatter; a missing
// all-gather or all-to-all curve falls back to the all-reduce one).
const Curve& curve_for(const LinkSpec& l, CollectiveKind k) {
  switch (k) {
    case CollectiveKind::kAllReduce:
      return l.allreduce_busbw_gbps;
    case CollectiveKind::kAllGather:
    case CollectiveKind::kReduceScatter:
      return l.allgather_busbw_gbps.empty() ? l.allreduce_busbw_gbps : l.allgather_busbw_gbps;
    case CollectiveKind::kAllToAll:
      return l.alltoall_busbw_gbps.empty() ? l.allreduce_busbw_gbps : l.alltoall_busbw_gbps;
    case CollectiveKind::kSendRecv:
      return l.p2p_gbps.empty() ? l.allreduce_busbw_gbps : l.p2p_gbps;
  }
  return l.allreduce_busbw_gbps;
}

// Bandwidth in bytes per second at message size `bytes`.
double bandwidth(const LinkSpec& l, CollectiveKind k, double bytes) {
  const Curve& c = curve_for(l, k);
  MPLAN_CHECK(!c.empty(), "link '", l.name, "' has no bandwidth curve for ", to_string(k));
  return curve_at(c, std::max(bytes, 1.0), 0.0) * kGB;
}

const LinkSpec& network(const ClusterSpec& c) {
  if (!c.has_inter_node())
    throw Error(cat("cluster.inter_node: cluster '", c.name,
                    "' has no network between nodes, but a group spans nodes"));
  return c.inter_node;
}

}  // namespace

int64_t collective_time_ns(const ClusterSpec& c, CollectiveKind kind, double bytes,
                           const GroupPlacement& g) {
  const int64_t fewest = g.fewest_per_node();
  MPLAN_CHECK(g.size >= 1 && g.nodes >= 1 && fewest >= 1 && fewest <= g.per_node &&
                  (g.even() ? g.nodes * g.per_node == g.size
                            : g.per_node + (g.nodes - 1) * fewest <= g.size &&
                                  g.size <= fewest + (g.nodes - 1) * g.per_node),
              "placement size ", g.size, " nodes ", g.nodes, " per node ", fewest, " to ",
              g.per_node);
  MPLAN_CHECK(bytes >= 0, "bytes ", bytes);
  if (g.size == 1 || bytes == 0) return 0;
  if (kind == CollectiveKind::kSendRecv) return p2p_time_ns(c, bytes, g.nodes == 1);

  const double n = static_cast<double>(g.size);
  const double k = static_cast<double>(g.per_node);  // the busiest node's members
  const double k_min = static_cast<double>(fewest);  // the least populated node's members
  if (g.nodes == 1) {
    // t = α + S·f(n)/busbw(S)
    const double s = bytes * bus_factor(kind, g.size) / bandwidth(c.intra_node, kind, bytes);
    return to_ns(c.intra_node.latency_us * 1e3 + s * 1e9);
  }

  const LinkSpec& net = network(c);
  const double share = nic_share_per_gpu(c);
  double intra_s = 0, inter_s = 0;
  if (kind == CollectiveKind::kAllToAll) {
    // Each GPU sends S/n to every other member: (k-1)·S/n over NVLink, (n-k)·S/n through its NIC
    // share. The profile's busbw (factor (n-1)/n) is per GPU, so a volume V takes V/busbw. The
    // slowest member: most NVLink peers on the busiest node, most remote peers on the emptiest.
    if (g.per_node > 1) intra_s = (k - 1) / n * bytes / bandwidth(c.intra_node, kind, bytes);
    inter_s = (n - k_min) / n * bytes / (share * bandwidth(net, kind, bytes));
  } else {
    // Ring-type collectives as NCCL's rings run them over nodes: f(k) of S on NVLink inside each
    // node; between nodes, every ring (one per channel) crosses each node boundary once, so a
    // node's network carries f(n)·S in each direction — the volume each rank sends — spread
    // over its k GPUs' NIC shares (one channel per NIC). With one GPU per node that is the ring
    // over N nodes, f(N)·S; with k > 1 it is f(n)/f(N) more than a hierarchical reduction of
    // S/k slices would move (NCCL does that only with in-network reduction, NVLS or CollNet,
    // not assumed). Uneven: the busiest node bounds the NVLink phase, the emptiest the network.
    const double slice = bytes / k_min;
    if (g.per_node > 1)
      intra_s = bus_factor(kind, g.per_node) * bytes / bandwidth(c.intra_node, kind, bytes);
    inter_s = bus_factor(kind, g.size) * slice / (share * bandwidth(net, kind, slice));
  }
  const double alpha_us = net.latency_us + (g.per_node > 1 ? c.intra_node.latency_us : 0.0);
  return to_ns(alpha_us * 1e3 + std::max(intra_s, inter_s) * 1e9);
}

int64_t p2p_time_ns(const ClusterSpec& c, double bytes, bool same_node) {
  MPLAN_CHECK(bytes >= 0, "bytes ", bytes);
  if (bytes == 0) return 0;
  if (same_node) {
    const LinkSpec& l = c.intra_node;
    return to_ns(l.latency_us * 1e3 + bytes / bandwidth(l, CollectiveKind::kSendRecv, bytes) * 1e9);
  }
  const LinkSpec& net = network(c);
  const double bw = nic_share_per_gpu(c) * bandwidth(net, CollectiveKind::kSendRecv, bytes);
  return to_ns(net.latency_us * 1e3 + bytes / bw * 1e9);
}

}  // namespace mplan::cost
