// IndexedDatasetWriter: writes PREFIX.bin and PREFIX.idx as Megatron-LM's IndexedDatasetBuilder
// does (one sequence per non-empty document; an empty document adds only a document boundary).
// Invariant: the two files appear under their final names only when finalize() succeeds (they
// are written under temporary names and renamed), so an interrupted run never leaves a pair
// that looks complete; a writer destroyed without finalize() removes its temporary files.
#pragma once

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "exec/data/indexed_dataset.hpp"

namespace mplan::exec {

class IndexedDatasetWriter {
 public:
  // Integer dtypes only; an id that does not fit the dtype is an Error at add_document().
  IndexedDatasetWriter(std::string prefix, TokenDtype dtype);
  ~IndexedDatasetWriter();
  IndexedDatasetWriter(const IndexedDatasetWriter&) = delete;
  IndexedDatasetWriter& operator=(const IndexedDatasetWriter&) = delete;

  // One document of one sequence (Megatron's add_document(tokens, [len(tokens)])); an empty
  // document adds only its boundary.
  void add_document(std::span<const int32_t> tokens);
  // One document of several sequences (sentences) of the given lengths, summing to tokens.size().
  void add_document(std::span<const int32_t> tokens, std::span<const int32_t> sequence_lengths);
  // Writes the index and renames both files to PREFIX.bin / PREFIX.idx.
  void finalize();

  int64_t num_documents() const { return static_cast<int64_t>(document_indices_.size()) - 1; }
  int64_t num_tokens() const { return num_tokens_; }

 private:
  std::string prefix_;
  TokenDtype dtype_;
  std::FILE* bin_ = nullptr;
  std::vector<int32_t> lengths_;
  std::vector<int64_t> document_indices_{0};
  std::vector<std::byte> buffer_;
  int64_t num_tokens_ = 0;
  bool finalized_ = false;
};

}  // namespace mplan::exec
