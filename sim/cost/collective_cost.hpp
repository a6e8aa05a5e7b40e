// Time of NCCL collectives and send/recv between GPUs of a cluster: α + S·f(n)/busbw, with the
// nccl-tests bus factors f(n) and bus bandwidths from the hardware profile, by message size and
// by where the group lies: inside one node (NVLink), or across nodes, where the collective is
// costed hierarchically (NVLink part and network part; the slower one bounds it) and the GPUs of a
// node share its network adapters. Invariant: a group of one GPU costs nothing.
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

// Where a group's GPUs are: `size` GPUs over `nodes` nodes, `per_node` on each (uniform).
struct GroupPlacement {
  int64_t size = 1;
  int64_t nodes = 1;
  int64_t per_node = 1;
};

// Placement of a group given its global ranks, with rank r on node r / gpus_per_node (the
// mapping RankGrid's placement uses). Throws an InternalError when the group is not spread
// evenly over its nodes.
GroupPlacement placement_of(const std::vector<int64_t>& ranks, int64_t gpus_per_node);

// Time of one collective over a group placed as `g`; `bytes` is the nccl-tests size S: the whole
// buffer of an all-reduce, the full (gathered) output of an all-gather, the full input of a
// reduce-scatter, each rank's whole send buffer of an all-to-all, the message of a send/recv
// (for send/recv, `g` is the pair: nodes 1 or 2).
int64_t collective_time_ns(const ClusterSpec& c, CollectiveKind kind, double bytes,
                           const GroupPlacement& g);

// Send/recv of `bytes` between two GPUs, in the same node or not.
int64_t p2p_time_ns(const ClusterSpec& c, double bytes, bool same_node);

// Fraction of one network adapter available to each GPU when all GPUs of a node communicate
// at once: min(1, nics_per_node / gpus_per_node).
double nic_share_per_gpu(const ClusterSpec& c);

}  // namespace mplan::cost
