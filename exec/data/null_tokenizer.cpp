// NullTokenizer: whitespace-separated decimal ids, each checked against the vocabulary size.
#include "exec/data/null_tokenizer.hpp"

#include <charconv>
#include <limits>
#include <string>

#include "src/common/error.hpp"

namespace mplan::exec {

NullTokenizer::NullTokenizer(int64_t vocab_size) : vocab_size_(vocab_size) {
  if (vocab_size < 1 || vocab_size > std::numeric_limits<int32_t>::max())
    throw Error(cat("--vocab-size: must be in [1, 2^31), got ", vocab_size));
}

void NullTokenizer::tokenize(std::string_view text, std::vector<int32_t>& out) {
  size_t i = 0;
  auto space = [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
  };
  while (i < text.size()) {
    while (i < text.size() && space(text[i])) ++i;
    if (i >= text.size()) break;
    size_t j = i;
    while (j < text.size() && !space(text[j])) ++j;
    const std::string_view word = text.substr(i, j - i);
    int64_t id = -1;
    const auto [end, ec] = std::from_chars(word.data(), word.data() + word.size(), id);
    if (ec != std::errc() || end != word.data() + word.size())
      throw Error(cat("\"", word, "\" is not a token id (NullTokenizer reads integers)"));
    if (id < 0 || id >= vocab_size_)
      throw Error(cat("token id ", id, " is outside the vocabulary [0, ", vocab_size_, ")"));
    out.push_back(static_cast<int32_t>(id));
    i = j;
  }
}

}  // namespace mplan::exec
