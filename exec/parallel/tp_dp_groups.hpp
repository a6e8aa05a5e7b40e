// The communication groups of one rank for layouts with tensor and data parallelism only
// (cp = ep = pp = 1), in Megatron's default order tp-cp-ep-dp-pp: world rank = tp_rank +
// tp·dp_rank. A stand-in for the RankGrid of src/parallel: the runner gets its GroupMembers from
// this one function, so swapping in RankGrid changes one call.
#pragma once

#include <cstdint>

#include "exec/comm.hpp"

namespace mplan::exec {

// Kinds "tp" (tp_rank 0..tp-1 at fixed dp_rank), "dp" (dp_rank 0..dp-1 at fixed tp_rank) and
// "tp-dp" (every rank, in world order), each listing world ranks in Megatron's member order.
GroupMembers tp_dp_group_members(int64_t tp, int64_t dp, int world_rank);

}  // namespace mplan::exec
