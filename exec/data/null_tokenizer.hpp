// NullTokenizer: Megatron-LM's NullTokenizer: the text already is token ids, separated by
// whitespace; the vocabulary size is given (--vocab-size) and the end-of-document id is
// vocab_size - 1. Invariant: every id returned is in [0, vocab_size).
#pragma once

#include "exec/data/tokenizer.hpp"

namespace mplan::exec {

class NullTokenizer final : public Tokenizer {
 public:
  explicit NullTokenizer(int64_t vocab_size);
  void tokenize(std::string_view text, std::vector<int32_t>& out) override;
  int64_t vocab_size() const override { return vocab_size_; }
  int32_t eod() const override { return static_cast<int32_t>(vocab_size_ - 1); }
  std::unique_ptr<Tokenizer> clone() const override {
    return std::make_unique<NullTokenizer>(vocab_size_);
  }

 private:
  int64_t vocab_size_;
};

}  // namespace mplan::exec
