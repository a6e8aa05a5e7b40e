// fill_batch: reads this rank's samples of one iteration and lays them out (M, s, b).
#include "exec/data/token_source.hpp"

#include "src/common/error.hpp"

namespace mplan::exec {

void fill_batch(const TokenSource& source, int64_t first_sample, int64_t micro_batch,
                int64_t num_microbatches, int64_t dp, int64_t dp_rank, std::vector<int32_t>& inputs,
                std::vector<int32_t>& targets) {
  const int64_t s = source.sample_tokens() - 1, b = micro_batch;
  MPLAN_CHECK(s >= 1 && b >= 1 && dp >= 1 && dp_rank >= 0 && dp_rank < dp, "s=", s, " b=", b,
              " dp=", dp, " rank=", dp_rank);
  inputs.assign(static_cast<size_t>(num_microbatches * s * b), 0);
  targets.assign(inputs.size(), 0);
  std::vector<int32_t> tokens(static_cast<size_t>(s + 1));
  for (int64_t k = 0; k < num_microbatches; ++k) {
    const int64_t first = first_sample + k * b * dp + dp_rank * b;
    for (int64_t j = 0; j < b; ++j) {
      source.sample(first + j, tokens);
      for (int64_t p = 0; p < s; ++p) {
        const auto at = static_cast<size_t>((k * s + p) * b + j);  // (M, s, b)
        inputs[at] = tokens[static_cast<size_t>(p)];
        targets[at] = tokens[static_cast<size_t>(p + 1)];
      }
    }
  }
}

}  // namespace mplan::exec
