// CSV of every simulated candidate of a sweep, one row each in enumeration order, with its rank
// among the fitting ones (empty when it does not fit) and its figures. The first column is the
// schema_version of this layout (1), repeated so that any row stands alone.
#pragma once

#include <string>

#include "sim/sweep/sweep.hpp"

namespace mplan::sweep {

// Header: schema_version,index,rank,tp,cp,ep,etp,pp,vpp,dp,first_stage_layers,
// last_stage_layers,micro_batch_size,num_microbatches,sequence_parallel,recompute,
// distributed_optimizer,schedule,iteration_time_s,tokens_per_s,model_tflops_per_gpu,mfu,
// bubble_fraction,compute_s,tp_comm_s,cp_comm_s,ep_comm_s,pp_comm_s,dp_comm_s,bubble_s,
// optimizer_s,peak_bytes,capacity_bytes,fits. Numbers in full precision (%.9g), booleans 0/1.
std::string sweep_csv(const SweepRequest& request, const SweepResult& result);

}  // namespace mplan::sweep
