// A cheap lower bound on the peak memory simulate() reports for a valid plan, so the sweep can
// count a candidate as out of memory without simulating it. Invariant (tested against simulate()
// on whole sweeps): memory_lower_bound(plan) <= simulate(plan).peak_bytes, so pruning with it
// never changes which plans fit.
#pragma once

#include <cstdint>

#include "src/plan/plan.hpp"

namespace mplan::sweep {

// Max over pipeline stages of: the stage's model state (weights, main grads and optimizer state;
// with the distributed optimizer sharded over the largest group Megatron could shard it over,
// dp·cp, and expert dp for experts) + the runtime overhead of the GPU profile + the activations
// alive when the stage's first backward starts: its warm-up forwards + 1 (Megatron's
// num_warmup_microbatches, capped at all vpp·M chunk forwards), each counted as the stage's
// smallest model chunk, layers only, with every saving the cost model knows (flash attention, no
// dropout, only checkpoints under full recompute) so that it stays below any setting the
// simulator uses.
int64_t memory_lower_bound(const Plan& plan);

}  // namespace mplan::sweep
