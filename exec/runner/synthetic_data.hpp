// Synthetic training data: random tokens that depend only on (seed, sample index, position), so
// every layout sees the same global batch. Samples are consumed as Megatron's pretraining sampler
// does: micro-batch step k of an iteration that starts at consumed sample c takes samples
// [c + k·b·dp, +b·dp) (c = i·M·b·dp for a constant batch) and data-parallel
// rank r the b of them starting at r·b (M micro-batches per iteration, b = micro-batch size).
// A sample is s + 1 tokens: inputs are tokens [0, s), targets tokens [1, s + 1).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace mplan::exec {

struct SyntheticData {
  uint64_t seed = 0;
  int64_t vocab = 0;  // tokens are uniform in [0, vocab) (the unpadded vocabulary)
  int64_t seq = 0;
  int64_t micro_batch = 0;
  int64_t num_microbatches = 0;  // per iteration
  int64_t dp = 1;
  int64_t dp_rank = 0;

  // Inputs and targets of every micro-batch of iteration `iteration`: (M, s, b) i32 each.
  void fill(int64_t iteration, std::vector<int32_t>& inputs, std::vector<int32_t>& targets) const;
  // The same for an iteration of `microbatches` micro-batches that starts after
  // `consumed_samples` samples (batch-size ramp-up changes the count between iterations).
  void fill_at(int64_t consumed_samples, int64_t microbatches, std::vector<int32_t>& inputs,
               std::vector<int32_t>& targets) const;
  // Token `position` (0..s) of global sample `sample`.
  int32_t token(int64_t sample, int64_t position) const;
};

}  // namespace mplan::exec
