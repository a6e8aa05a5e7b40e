// MpiComm: Comm over MPI for host tensors (the CPU backend's). Collectives are blocking, so the
// stream argument only keeps the call order. Reductions are deterministic and bitwise identical
// on every member: each rank sums one block of the tensor over the members in group-rank order,
// in f32 (bf16 inputs converted, rounded once at the end), then the blocks are all-gathered.
// MpiCommWorld: one MpiComm per group kind, made by MPI_Comm_split of a base communicator.
#pragma once

#include <mpi.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "exec/comm.hpp"

namespace mplan::exec {

class MpiComm final : public Comm {
 public:
  // Takes ownership of `comm` (freed on destruction) unless it is MPI_COMM_WORLD or MPI_COMM_SELF.
  explicit MpiComm(MPI_Comm comm);
  ~MpiComm() override;
  MpiComm(const MpiComm&) = delete;
  MpiComm& operator=(const MpiComm&) = delete;

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

  MPI_Comm handle() const { return comm_; }

 private:
  struct P2p {
    bool is_send;
    Tensor t;
    int peer;
  };
  MPI_Comm comm_;
  int rank_ = 0;
  int size_ = 1;
  bool in_group_ = false;
  std::vector<P2p> pending_;
};

class MpiCommWorld final : public CommWorld {
 public:
  // For each group kind, the members as ranks of `base` (this rank among them); every rank of
  // `base` must pass the same kinds. Collective over `base`.
  explicit MpiCommWorld(const GroupMembers& groups, MPI_Comm base = MPI_COMM_WORLD);

  int world_rank() const override { return world_rank_; }
  int world_size() const override { return world_size_; }
  Comm& group(const std::string& kind) override;

 private:
  int world_rank_ = 0;
  int world_size_ = 1;
  std::map<std::string, std::unique_ptr<MpiComm>> comms_;
};

}  // namespace mplan::exec
