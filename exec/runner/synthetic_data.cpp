// SyntheticData: counter-based tokens in Megatron's sample order.
#include "exec/runner/synthetic_data.hpp"

#include "exec/model/init_rng.hpp"

namespace mplan::exec {

int32_t SyntheticData::token(int64_t sample, int64_t position) const {
  return static_cast<int32_t>(counter_uniform(seed, static_cast<uint64_t>(sample),
                                              static_cast<uint64_t>(position),
                                              static_cast<uint64_t>(vocab)));
}

void SyntheticData::fill(int64_t iteration, std::vector<int32_t>& inputs,
                         std::vector<int32_t>& targets) const {
  fill_at(iteration * num_microbatches * micro_batch * dp, num_microbatches, inputs, targets);
}

void SyntheticData::fill_at(int64_t consumed_samples, int64_t microbatches,
                            std::vector<int32_t>& inputs, std::vector<int32_t>& targets) const {
  const int64_t s = seq, b = micro_batch;
  inputs.assign(static_cast<size_t>(microbatches * s * b), 0);
  targets.assign(inputs.size(), 0);
  for (int64_t k = 0; k < microbatches; ++k) {
    int64_t first = consumed_samples + k * b * dp + dp_rank * b;
    for (int64_t j = 0; j < b; ++j) {
      for (int64_t p = 0; p < s; ++p) {
        size_t at = static_cast<size_t>((k * s + p) * b + j);  // (M, s, b)
        inputs[at] = token(first + j, p);
        targets[at] = token(first + j, p + 1);
      }
    }
  }
}

}  // namespace mplan::exec
