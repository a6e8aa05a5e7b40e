// SyntheticTokenSource: counter-based tokens.
#include "exec/data/synthetic_token_source.hpp"

#include <limits>

#include "exec/model/init_rng.hpp"
#include "src/common/error.hpp"

namespace mplan::exec {

SyntheticTokenSource::SyntheticTokenSource(uint64_t seed, int64_t vocab, int64_t seq_length)
    : seed_(seed), vocab_(vocab), seq_length_(seq_length) {
  MPLAN_CHECK(vocab >= 1 && seq_length >= 1, "vocab=", vocab, " seq_length=", seq_length);
}

int64_t SyntheticTokenSource::size() const { return std::numeric_limits<int64_t>::max(); }

void SyntheticTokenSource::sample(int64_t index, std::span<int32_t> out) const {
  MPLAN_CHECK(static_cast<int64_t>(out.size()) == seq_length_ + 1, "out has ", out.size());
  for (size_t p = 0; p < out.size(); ++p)
    out[p] = static_cast<int32_t>(
        counter_uniform(seed_, static_cast<uint64_t>(index), p, static_cast<uint64_t>(vocab_)));
}

}  // namespace mplan::exec
