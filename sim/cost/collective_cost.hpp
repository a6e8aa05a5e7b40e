// Time of NCCL collectives and send/recv between GPUs of a cluster: α + S·f(n)/busbw, with the
// nccl-tests bus factors f(n) and bus bandwidths from the hardware profile, by message size and
// by where the group lies: inside one node (NVLink), or across nodes, where the collective is
// costed hierarchically (NVLink part and network part; the slower one bounds it) and the GPUs of a
// node share its network adapters. A group spread unevenly over its nodes is costed by its slowest
// member's links. Invariant: a group of one GPU costs nothing.
#pragma once

#include <cstdint>
#include <vector>

#include "src/plan/cluster_spec.hpp"

namespace mplan::cost {

enum class CollectiveKind { kAllReduce, kAllGather, kReduceScatter, kAllToAll, kSendRecv };
const char* to_string(CollectiveKind k);

// nccl-tests bus factor (doc/PERFORMANCE.md): busbw = algbw · f(n). All-reduce 2(n-1)/n;
// all-gather, reduce-scatter and all-to-all (n-1)/n; send/recv 1.
double bus_factor(CollectiveKind k, int64_t n);

// Where a group's GPUs are: `size` GPUs over `nodes` nodes, `per_node` on each when spread
// evenly (size = nodes · per_node). Spread unevenly — as a data-parallel group of 3 GPUs with
// 2 on one node and 1 on another — `per_node` is the most GPUs on one node and `min_per_node`
// the fewest (0 means even). sim/plan_sim/stage_groups computes placements from the rank grid.
struct GroupPlacement {
  int64_t size = 1;
  int64_t nodes = 1;
  int64_t per_node = 1;
  int64_t min_per_node = 0;
  int64_t fewest_per_node() const { return min_per_node > 0 ? min_per_node : per_node; }
  bool even() const { return min_per_node == 0 || min_per_node == per_node; }
  bool operator==(const GroupPlacement&) const = default;
};

// Time of one collective over a group placed as `g`; `bytes` is the nccl-tests size S: the whole
// buffer of an all-reduce, the full (gathered) output of an all-gather, the full input of a
// reduce-scatter, each rank's whole send buffer of an all-to-all, the message of a send/recv
// (for send/recv, `g` is the pair: nodes 1 or 2). Uneven across nodes: the NVLink phase is that
// of the node with the most members (per_node), the network phase that of the node with the
// fewest (each of its GPUs carries the largest slice through its NIC share).
int64_t collective_time_ns(const ClusterSpec& c, CollectiveKind kind, double bytes,
                           const GroupPlacement& g);

// Send/recv of `bytes` between two GPUs, in the same node or not.
int64_t p2p_time_ns(const ClusterSpec& c, double bytes, bool same_node);

// Fraction of one network adapter available to each GPU when all GPUs of a node communicate
// at once: min(1, nics_per_node / gpus_per_node).
double nic_share_per_gpu(const ClusterSpec& c);

}  // namespace mplan::cost
