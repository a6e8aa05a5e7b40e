// Gpt2BpeTokenizer: GPT-2's byte-level BPE (Megatron-LM's GPT2BPETokenizer) from a vocabulary JSON
// (encoder.json / vocab.json: token string -> id) and a merges file (vocab.bpe / merges.txt: one
// "A B" pair per line in rank order, after a "#version" line). Text is split by GPT-2's
// pre-tokenizer pattern
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// (implemented by hand over code points), each piece's UTF-8 bytes are mapped to GPT-2's
// byte-to-unicode characters, and the lowest-ranked adjacent pair is merged everywhere until no
// ranked pair is left, as GPT-2's encoder.py does. "<|endoftext|>" in the text is plain text (as
// in GPT-2's encoder); its id is eod(). Invariant: the ids equal GPT-2's for any UTF-8 text.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "exec/data/tokenizer.hpp"

namespace mplan::exec {

// GPT-2's pre-tokenization: the byte ranges [begin, end) of the pieces of `text`, in order,
// covering it exactly. Bytes that are not valid UTF-8 count as one "other" character each.
std::vector<std::pair<size_t, size_t>> gpt2_pretokenize(std::string_view text);

// GPT-2's bytes_to_unicode(): the printable character that stands for byte b.
char32_t gpt2_byte_to_unicode(uint8_t b);

class Gpt2BpeTokenizer final : public Tokenizer {
 public:
  // Reads both files; a missing or malformed file is an Error naming it (and the flag).
  static Gpt2BpeTokenizer from_files(const std::string& vocab_file, const std::string& merge_file);
  // From the files' contents (`vocab_name`, `merge_name` label errors).
  static Gpt2BpeTokenizer from_text(const std::string& vocab_json, const std::string& merges,
                                    const std::string& vocab_name = "--vocab-file",
                                    const std::string& merge_name = "--merge-file");

  void tokenize(std::string_view text, std::vector<int32_t>& out) override;
  std::vector<int32_t> tokenize(std::string_view text) {
    std::vector<int32_t> ids;
    tokenize(text, ids);
    return ids;
  }
  // The text of `ids` (bytes of every token, concatenated).
  std::string detokenize(const std::vector<int32_t>& ids) const;
  int64_t vocab_size() const override;
  int32_t eod() const override;
  std::unique_ptr<Tokenizer> clone() const override;

  struct Model;  // vocabulary and merge table, shared by clones

 private:
  explicit Gpt2BpeTokenizer(std::shared_ptr<const Model> model) : model_(std::move(model)) {}
  std::shared_ptr<const Model> model_;
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  // Pieces already encoded: bytes -> ids (GPT-2's cache; cleared when it grows large).
  std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> cache_;
  std::vector<int32_t> word_, merged_;
  void encode_piece(std::string_view piece, std::vector<int32_t>& out);
};

}  // namespace mplan::exec
