// NcclComm: Comm (exec/comm.hpp) over one NCCL communicator, on device tensors (f32, bf16, i32),
// issued on the CudaBackend stream each call names. NcclCommWorld: the world communicator plus
// one communicator per group kind this rank belongs to, built collectively over MPI.
// Invariants: RAII (communicators are destroyed with their owner, which must happen before
// MPI_Finalize); NVLink multicast stays off (NCCL_NVLS_ENABLE=0 is set before any NCCL init
// unless the environment already sets it); every rank creates the same group kinds in the same
// (sorted) order, checked over MPI before any NCCL call that could otherwise hang.
#pragma once

#include <nccl.h>

#include <map>
#include <memory>
#include <string>

#include "exec/comm.hpp"
#include "exec/cuda/cuda_backend.hpp"

namespace mplan::exec::cuda {

class NcclComm final : public Comm {
 public:
  // Takes ownership of `comm`, whose device is backend.device().
  NcclComm(ncclComm_t comm, CudaBackend& backend);
  ~NcclComm() override;
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void all_reduce(Tensor t, ReduceOp op, Stream s) override;
  void all_gather(Tensor send, Tensor recv, Stream s) override;
  void reduce_scatter(Tensor send, Tensor recv, Stream s) override;
  void broadcast(Tensor t, int root, Stream s) override;
  void send(Tensor t, int peer, Stream s) override;
  void recv(Tensor t, int peer, Stream s) override;
  void group_start() override;
  void group_end() override;

  ncclComm_t handle() const { return comm_; }

 private:
  ncclComm_t comm_;
  CudaBackend& backend_;
  int rank_ = 0;
  int size_ = 1;
};

class NcclCommWorld final : public CommWorld {
 public:
  // Collective over MPI_COMM_WORLD (MPI must be initialized): every rank passes its own groups.
  NcclCommWorld(const GroupMembers& groups, CudaBackend& backend);
  ~NcclCommWorld() override;

  int world_rank() const override { return world_rank_; }
  int world_size() const override { return world_size_; }
  Comm& group(const std::string& kind) override;
  // The communicator of every rank in the job.
  NcclComm& world() { return *world_; }

 private:
  int world_rank_ = 0;
  int world_size_ = 1;
  std::unique_ptr<NcclComm> world_;
  std::map<std::string, std::unique_ptr<NcclComm>> groups_;
};

// Sets NCCL_NVLS_ENABLE=0 unless the environment already sets it.
void disable_nvls_unless_set();

}  // namespace mplan::exec::cuda

namespace mplan::exec {

// NcclCommWorld over `backend`, which must be a CUDA backend (make_cuda_backend).
std::unique_ptr<CommWorld> make_nccl_comm_world(const GroupMembers& groups, Backend& backend);

}  // namespace mplan::exec
