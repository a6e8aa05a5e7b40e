// IndexedDataset: Megatron-LM's indexed dataset (megatron/core/datasets/indexed_dataset.py),
// PREFIX.idx + PREFIX.bin, both memory-mapped. The .idx is: "MMIDIDX\0\0", u64 version (1),
// u8 dtype code, u64 sequence count S, u64 document count D, i32 lengths[S], i64 pointers[S]
// (byte offsets into .bin), i64 document_indices[D] (0, then the end sequence of each document).
// Invariant: everything is checked against both file lengths when the object is built, so every
// later read is in bounds; a bad file is an mplan::Error naming it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>

#include "exec/data/mapped_file.hpp"

namespace mplan::exec {

// Megatron's DType codes (the numpy dtype of the tokens in .bin).
enum class TokenDtype : uint8_t {
  kUint8 = 1,
  kInt8 = 2,
  kInt16 = 3,
  kInt32 = 4,
  kInt64 = 5,
  kFloat64 = 6,
  kFloat32 = 7,
  kUint16 = 8,
};

const char* to_string(TokenDtype d);
int64_t dtype_bytes(TokenDtype d);
// Megatron's DType.optimal_dtype(vocab_size): uint16 below 65500 tokens, else int32.
TokenDtype optimal_token_dtype(int64_t vocab_size);

inline constexpr char kIndexMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
inline constexpr int64_t kIndexHeaderBytes = 34;  // magic 9 + version 8 + dtype 1 + S 8 + D 8

class IndexedDataset {
 public:
  // Maps PREFIX.idx and PREFIX.bin and checks them.
  explicit IndexedDataset(const std::string& prefix);

  const std::string& prefix() const { return prefix_; }
  TokenDtype dtype() const { return dtype_; }
  int64_t num_sequences() const { return num_sequences_; }
  // Documents: document_indices has num_documents() + 1 entries.
  int64_t num_documents() const { return num_doc_indices_ - 1; }
  int64_t num_tokens() const { return num_tokens_; }

  int32_t sequence_length(int64_t i) const { return idx_.load<int32_t>(kIndexHeaderBytes + 4 * i); }
  int64_t sequence_pointer(int64_t i) const {
    return idx_.load<int64_t>(kIndexHeaderBytes + 4 * num_sequences_ + 8 * i);
  }
  int64_t document_index(int64_t i) const {
    return idx_.load<int64_t>(kIndexHeaderBytes + 12 * num_sequences_ + 8 * i);
  }

  // Tokens [offset, offset + out.size()) of sequence `sequence`, as int32 (Megatron's get()).
  void read(int64_t sequence, int64_t offset, std::span<int32_t> out) const;

  // The smallest and largest token id in the .bin, by one pass over it ({0, -1} when it holds
  // no tokens).
  std::pair<int64_t, int64_t> token_id_range() const;

  // File sizes in bytes.
  int64_t idx_bytes() const { return idx_.size(); }
  int64_t bin_bytes() const { return bin_.size(); }

 private:
  std::string prefix_;
  MappedFile idx_, bin_;
  TokenDtype dtype_ = TokenDtype::kInt32;
  int64_t num_sequences_ = 0, num_doc_indices_ = 0, num_tokens_ = 0;
};

}  // namespace mplan::exec
