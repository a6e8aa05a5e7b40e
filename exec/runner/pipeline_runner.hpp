// PipelineRunner: runs one pipeline rank's actions of a Schedule (src/schedule — the very object
// the simulator costs) for one iteration: each compute action is a pass of StageModel; each run of
// p2p actions up to `ends_group` is one grouped call on the pp communicator (NCCL group / MPI
// Isend-Irecv-Waitall), issued in the schedule's order, which is the same on both peers. No
// schedule logic lives here: the order, the peers and the grouping all come from the Schedule.
// Every action is a span of the Tracer; the action in progress is published for the watchdog.
// Invariant: the last backward (or, split, the last W) of each chunk is the one that tells the
// gradient sync which gradients are final, so data-parallel buckets reduce during that pass.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

#include "exec/backend.hpp"
#include "exec/comm.hpp"
#include "exec/model/stage_model.hpp"
#include "exec/parallel/grad_sync.hpp"
#include "exec/tracer.hpp"
#include "src/schedule/schedule.hpp"

namespace mplan::exec {

// What the host is doing, for the watchdog (thread-safe).
class Progress {
 public:
  void set(std::string what);
  std::string get() const;
  uint64_t count() const { return count_.load(); }  // changes with every set()

 private:
  mutable std::mutex mutex_;
  std::string what_;
  std::atomic<uint64_t> count_{0};
};

// One iteration's micro-batches on this rank: (M, s, b) i32 each (unused where empty).
struct IterationBatch {
  Tensor tokens, targets;
  float grad_scale = 1.0f;  // dL/dlogit scale: 1 / (tokens per micro-batch · M · dp)
  Tensor loss_sum;          // (1) f32: the last stage adds its per-token losses here
};

class PipelineRunner {
 public:
  PipelineRunner(StageModel& model, Comm& pp, Tracer* tracer, Progress* progress);

  // Runs pipeline rank `pp_rank`'s actions of `schedule` (whose micro-batch count matches the
  // batch) for iteration `iteration` (for messages).
  void run(const Schedule& schedule, int64_t pp_rank, const IterationBatch& batch, GradSync& sync,
           int64_t iteration);

 private:
  void p2p_group(std::span<const Action> group, const Schedule& s, int64_t iteration);
  Tensor micro(Tensor all, int64_t mb) const;

  StageModel& model_;
  Comm& pp_;
  Tracer* tracer_;
  Progress* progress_;
};

}  // namespace mplan::exec
