// Tokenizer: text to token ids, as Megatron-LM's tokenizers for tools/preprocess_data.py.
// Implementations: Gpt2BpeTokenizer (GPT2BPETokenizer), NullTokenizer. Invariant: tokenize() of
// the same text gives the same ids on every instance; an instance is used by one thread at a
// time (clone() gives another for another thread, sharing the immutable vocabulary).
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

namespace mplan::exec {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Appends the ids of `text` to `out`. Bad input (e.g. a non-integer for NullTokenizer) throws
  // mplan::Error with a reason (the caller adds the file and line).
  virtual void tokenize(std::string_view text, std::vector<int32_t>& out) = 0;
  virtual int64_t vocab_size() const = 0;
  virtual int32_t eod() const = 0;  // end-of-document id appended by --append-eod
  virtual std::unique_ptr<Tokenizer> clone() const = 0;
};

}  // namespace mplan::exec
