// TokenSource: where training samples come from, indexed by global sample index. A sample is
// seq_length + 1 tokens: inputs are tokens [0, s), targets tokens [1, s + 1). Invariant: sample(i)
// depends only on i (and the source's construction), so a data-parallel rank reads only its own
// samples and any two layouts that consume the same sample indices see identical batches.
// Implementations: GptDataset, BlendedDataset (Megatron's datasets), SyntheticTokenSource.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace mplan::exec {

class TokenSource {
 public:
  virtual ~TokenSource() = default;
  // Number of samples: valid indices are [0, size()).
  virtual int64_t size() const = 0;
  // Tokens per sample (seq_length + 1).
  virtual int64_t sample_tokens() const = 0;
  // Writes sample `index` into `out` (out.size() == sample_tokens()). Thread-safe (const reads).
  virtual void sample(int64_t index, std::span<int32_t> out) const = 0;
};

// The inputs and targets of this data-parallel rank for one iteration, in Megatron's pretraining
// sampler order: micro-batch k of the iteration starting at global sample `first_sample` takes
// samples [first_sample + k·b·dp, +b·dp), and rank r the b of them starting at r·b.
// Output layout (M, s, b) int32 each (M micro-batches, b micro-batch size, s = sample_tokens() -
// 1).
void fill_batch(const TokenSource& source, int64_t first_sample, int64_t micro_batch,
                int64_t num_microbatches, int64_t dp, int64_t dp_rank, std::vector<int32_t>& inputs,
                std::vector<int32_t>& targets);

}  // namespace mplan::exec
