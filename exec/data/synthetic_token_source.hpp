// SyntheticTokenSource: random tokens for benchmarks (the executor's data without --data-path):
// token p of sample i is counter_uniform(seed, i, p, vocab), so every layout sees the same global
// batch. Unbounded: size() is INT64_MAX.
#pragma once

#include "exec/data/token_source.hpp"

namespace mplan::exec {

class SyntheticTokenSource final : public TokenSource {
 public:
  SyntheticTokenSource(uint64_t seed, int64_t vocab, int64_t seq_length);
  int64_t size() const override;
  int64_t sample_tokens() const override { return seq_length_ + 1; }
  void sample(int64_t index, std::span<int32_t> out) const override;

 private:
  uint64_t seed_;
  int64_t vocab_, seq_length_;
};

}  // namespace mplan::exec
