// simulate(plan): the predicted iteration time and per-stage peak memory of a plan, from a
// discrete-event simulation of its schedule (sim/des) with the cost model (sim/cost). This is the
// API `mplan simulate`, the sweep and `mplan run` (prediction beside measurement) share.
// Invariant: deterministic — the same plan and options give bitwise the same result.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "src/plan/plan.hpp"

namespace mplan {
struct Schedule;
}

namespace mplan::sim {

struct SimulationTrace;  // the simulated program and its timings (simulation_trace.hpp)

struct SimOptions {
  bool full_grid = false;     // one engine rank per GPU instead of one per pipeline stage
  bool record_trace = false;  // keep what write_trace() needs
  // Megatron-LM switches a plan does not carry, at Megatron's defaults:
  bool dropout = true;        // --attention-dropout / --hidden-dropout 0.1 (false: both 0): masks
                              // are stored and dropout kernels run
  bool fused_kernels = true;  // masked-softmax, bias-GeLU, bias-dropout-add and gradient-
                              // accumulation fusions (false: Megatron's --no-*-fusion flags)
  // Megatron-LM 2021-22's scatter/gather of pipeline tensors (SC'21 §4.1; removed since): without
  // sequence parallelism each tensor-parallel rank sends 1/tp of the activation and the receivers
  // all-gather it over NVLink. The published runs (sim/calibration) used it.
  bool pipeline_scatter_gather = false;
};

// Seconds per iteration spent in each category on the GPU of the busiest pipeline stage (the one
// with the least idle time, SimulationResult::critical_stage), from its compute stream's timeline;
// the parts add up to iteration_time_s.
struct TimeBreakdown {
  double compute_s = 0;    // forward, backward and recomputed forward kernels
  double tp_comm_s = 0;    // exposed tensor-parallel communication
  double cp_comm_s = 0;    // exposed context-parallel communication
  double ep_comm_s = 0;    // exposed expert-parallel all-to-all
  double pp_comm_s = 0;    // exposed pipeline send/recv
  double dp_comm_s = 0;    // exposed data-parallel gradient / parameter communication
  double bubble_s = 0;     // pipeline idle time not explained by the above
  double optimizer_s = 0;  // optimizer step (and gradient clipping)
};

struct StageMemory {
  int64_t pp_rank = 0;
  int64_t peak_bytes = 0;  // at the peak of this stage's timeline, incl. other_bytes
  int64_t weights_bytes = 0;
  int64_t grads_bytes = 0;
  int64_t optimizer_bytes = 0;
  int64_t activations_bytes = 0;  // alive at the peak
  int64_t other_bytes = 0;        // runtime overhead, communication buffers, workspaces
};

struct SimulationResult {
  double iteration_time_s = 0;
  double tokens_per_s = 0;          // global batch · seq_length / iteration time
  double model_tflops_per_gpu = 0;  // by flops_formula, no recompute counted
  double mfu = 0;                   // model_tflops_per_gpu / peak_bf16_tflops
  std::string flops_formula;        // which formula (e.g. "megatron")
  double bubble_fraction = 0;       // bubble_s / iteration_time_s of the busiest stage
  TimeBreakdown breakdown;
  std::vector<TimeBreakdown> stage_breakdown;  // the same on every pipeline stage's GPU
  std::vector<StageMemory> per_stage;          // one per pipeline stage
  int64_t peak_bytes = 0;                      // max over stages
  int64_t capacity_bytes = 0;                  // GPU memory of the cluster's GPU
  bool fits = false;                           // peak_bytes <= capacity_bytes

  // Added fields.
  int64_t num_microbatches = 0;          // per data-parallel rank and iteration
  int64_t critical_stage = 0;            // the stage the breakdown is taken on (busiest compute)
  int64_t num_engine_ranks = 0;          // pp, or the world size with full_grid
  int64_t num_ops = 0;                   // ops in the simulated program
  int64_t runtime_overhead_bytes = 0;    // the profile's per-GPU overhead, part of other_bytes
  double model_flops_per_iteration = 0;  // by flops_formula, the whole global batch
  std::shared_ptr<const SimulationTrace> trace;  // with SimOptions::record_trace
};

// Simulates one training iteration of a valid plan (call validate() first: an invalid plan is
// an InternalError here; a hardware profile without a number the costs need, e.g. no
// gemm_efficiency, is an mplan::Error naming it). Thread-safe: may be called concurrently on
// different plans.
SimulationResult simulate(const Plan& plan, const SimOptions& options = {});

// The same, writing into `out` (its vector keeps its capacity): with a repeated plan shape the
// call allocates nothing (per-thread Program, Engine, scratch and schedule cache are reused).
void simulate(const Plan& plan, const SimOptions& options, SimulationResult& out);

// Simulates `plan` walking a given schedule (hand-made or edited) instead of the plan's own.
// The schedule must match the plan's pp, vpp and micro-batch count (else mplan::Error
// "schedule: ..."); one that cannot complete throws mplan::Error "schedule: deadlock: <who waits
// on what>" instead of hanging; unmatched sends or receives are reported the same way.
SimulationResult simulate(const Plan& plan, const Schedule& schedule,
                          const SimOptions& options = {});

// Chrome trace-event JSON of a result simulated with record_trace (one process per rank, one
// thread per stream, ops with their kernels and collectives as nested slices, memory counters).
void write_trace(std::ostream& os, const SimulationResult& result);

}  // namespace mplan::sim
