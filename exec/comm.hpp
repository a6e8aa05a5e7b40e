// Comm: the collectives and point-to-point operations of one communication group, implemented
// over MPI (CPU tensors, exec/cpu) and over NCCL (GPU tensors, exec/cuda). CommWorld holds one
// Comm per RankGrid group kind this rank belongs to ("tp", "dp", "pp", "cp", "dp-cp", ...).
// Invariant: every member of a group issues the same collectives in the same order (the order
// the schedule fixes), from one host thread. Results are deterministic for a fixed group size.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "exec/backend.hpp"

namespace mplan::exec {

enum class ReduceOp : uint8_t { kSum, kMax };

class Comm {
 public:
  virtual ~Comm() = default;
  virtual int rank() const = 0;  // this process's index in the group (Megatron's member order)
  virtual int size() const = 0;
  // In place, on f32 or bf16 tensors. Issued on stream s (the CPU implementation is blocking).
  virtual void all_reduce(Tensor t, ReduceOp op, Stream s) = 0;
  // recv = concatenation over group ranks (in rank order) of each rank's send; recv.numel ==
  // size() · send.numel.
  // In place when send is this rank's block of recv.
  virtual void all_gather(Tensor send, Tensor recv, Stream s) = 0;
  // recv = rank r's block of the element-wise sum of every rank's send (send = size() blocks);
  // in place when recv is this rank's block of send.
  virtual void reduce_scatter(Tensor send, Tensor recv, Stream s) = 0;
  virtual void broadcast(Tensor t, int root, Stream s) = 0;
  // Point to point with `peer` given as a group rank. Sends and receives between group_start()
  // and group_end() are issued together, so their order cannot deadlock.
  virtual void send(Tensor t, int peer, Stream s) = 0;
  virtual void recv(Tensor t, int peer, Stream s) = 0;
  virtual void group_start() = 0;
  virtual void group_end() = 0;
};

// The groups of one rank: for each group kind, the world ranks of its members in Megatron's
// order (this rank among them). Built from RankGrid by the runner.
using GroupMembers = std::map<std::string, std::vector<int>>;

class CommWorld {
 public:
  virtual ~CommWorld() = default;
  virtual int world_rank() const = 0;
  virtual int world_size() const = 0;
  // The communicator of group kind `kind`; throws InternalError for a kind not built.
  virtual Comm& group(const std::string& kind) = 0;
};

}  // namespace mplan::exec
