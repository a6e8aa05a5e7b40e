// SelfCommWorld: a CommWorld whose every group is this rank alone, over any backend. Lets a test
// run the single-rank reference layout (tp 1, dp 1) on each rank of an mpirun job, whatever the
// backend: collectives of one member are copies or no-ops; point-to-point is a broken invariant.
#pragma once

#include "exec/comm.hpp"

namespace mplan::exec::testing {

class SelfComm final : public Comm {
 public:
  explicit SelfComm(Backend& be) : be_(be) {}
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void all_reduce(Tensor, ReduceOp, Stream) override {}
  void all_gather(Tensor send, Tensor recv, Stream) override { be_.copy(recv, send); }
  void reduce_scatter(Tensor send, Tensor recv, Stream) override { be_.copy(recv, send); }
  void broadcast(Tensor, int, Stream) override {}
  void send(Tensor, int, Stream) override { MPLAN_CHECK(false, "send in a group of one"); }
  void recv(Tensor, int, Stream) override { MPLAN_CHECK(false, "recv in a group of one"); }
  void group_start() override {}
  void group_end() override {}

 private:
  Backend& be_;
};

class SelfCommWorld final : public CommWorld {
 public:
  explicit SelfCommWorld(Backend& be) : comm_(be) {}
  int world_rank() const override { return 0; }
  int world_size() const override { return 1; }
  Comm& group(const std::string&) override { return comm_; }

 private:
  SelfComm comm_;
};

}  // namespace mplan::exec::testing
