// The CUDA side of the executor as the runner uses it: the device count, the CUDA backend of
// one device and the NCCL communicators of this rank's groups. Implemented in exec/cuda/ (built
// only when CUDA, cuBLAS, NCCL and MPI are found: MPLAN_HAVE_GPU).
#pragma once

#include <memory>

#include "exec/backend.hpp"
#include "exec/comm.hpp"

namespace mplan::exec {

// CUDA devices visible to this process; 0 when there is no device or driver.
int cuda_device_count();

// The CUDA backend on device `device` (this rank's local rank picks it).
std::unique_ptr<Backend> make_cuda_backend(int device);

// One NCCL communicator per group kind of `groups` (world ranks of MPI_COMM_WORLD), bootstrapped
// over MPI (rank 0's unique id broadcast); collectives run on `backend`'s streams.
std::unique_ptr<CommWorld> make_nccl_comm_world(const GroupMembers& groups, Backend& backend);

}  // namespace mplan::exec
