// IndexedDataset: the up-front checks of the .idx/.bin pair and token reads.
#include "exec/data/indexed_dataset.hpp"

#include <algorithm>
#include <cstring>
#include <limits>

#include "src/common/error.hpp"

namespace mplan::exec {

const char* to_string(TokenDtype d) {
  switch (d) {
    case TokenDtype::kUint8:
      return "uint8";
    case TokenDtype::kInt8:
      return "int8";
    case TokenDtype::kInt16:
      return "int16";
    case TokenDtype::kInt32:
      return "int32";
    case TokenDtype::kInt64:
      return "int64";
    case TokenDtype::kFloat64:
      return "float64";
    case TokenDtype::kFloat32:
      return "float32";
    case TokenDtype::kUint16:
      return "uint16";
  }
  return "?";
}

int64_t dtype_bytes(TokenDtype d) {
  switch (d) {
    case TokenDtype::kUint8:
    case TokenDtype::kInt8:
      return 1;
    case TokenDtype::kInt16:
    case TokenDtype::kUint16:
      return 2;
    case TokenDtype::kInt32:
    case TokenDtype::kFloat32:
      return 4;
    case TokenDtype::kInt64:
    case TokenDtype::kFloat64:
      return 8;
  }
  return 0;
}

TokenDtype optimal_token_dtype(int64_t vocab_size) {
  return vocab_size < 65500 ? TokenDtype::kUint16 : TokenDtype::kInt32;
}

namespace {

MappedFile map_part(const std::string& prefix, const char* suffix) {
  return MappedFile(prefix + suffix);
}

}  // namespace

IndexedDataset::IndexedDataset(const std::string& prefix)
    : prefix_(prefix), idx_(map_part(prefix, ".idx")), bin_(map_part(prefix, ".bin")) {
  const std::string& idx = idx_.path();
  const std::string& bin = bin_.path();
  const int64_t n = idx_.size();
  if (n < kIndexHeaderBytes ||
      !std::equal(kIndexMagic, kIndexMagic + 9, reinterpret_cast<const char*>(idx_.bytes().data())))
    throw Error(cat(idx, ": not a Megatron indexed dataset index (no MMIDIDX header)"));
  const uint64_t version = idx_.load<uint64_t>(9);
  if (version != 1)
    throw Error(cat(idx, ": index version ", version, ", only version 1 can be read"));
  const uint8_t code = idx_.load<uint8_t>(17);
  if (code < 1 || code > 8) throw Error(cat(idx, ": unknown dtype code ", int{code}));
  dtype_ = static_cast<TokenDtype>(code);
  if (dtype_ == TokenDtype::kFloat32 || dtype_ == TokenDtype::kFloat64)
    throw Error(cat(idx, ": tokens of dtype ", to_string(dtype_), " are not token ids"));
  const uint64_t s = idx_.load<uint64_t>(18), d = idx_.load<uint64_t>(26);
  // Lengths (4 B), pointers (8 B) per sequence and 8 B per document index; a multimodal index
  // adds one mode byte per sequence, which a GPT dataset ignores.
  const uint64_t room = static_cast<uint64_t>(n - kIndexHeaderBytes);
  if (s > room / 12 || d > room / 8 || 12 * s + 8 * d > room)
    throw Error(cat(idx, ": truncated: ", n, " bytes cannot hold ", s, " sequences and ", d,
                    " document indices"));
  const uint64_t expected = kIndexHeaderBytes + 12 * s + 8 * d;
  if (static_cast<uint64_t>(n) != expected && static_cast<uint64_t>(n) != expected + s)
    throw Error(cat(idx, ": ", n, " bytes, but ", s, " sequences and ", d,
                    " document indices take ", expected, " (corrupt or truncated)"));
  num_sequences_ = static_cast<int64_t>(s);
  num_doc_indices_ = static_cast<int64_t>(d);
  if (num_doc_indices_ < 1 || document_index(0) != 0)
    throw Error(cat(idx, ": document indices must start at 0"));
  for (int64_t i = 1; i < num_doc_indices_; ++i)
    if (document_index(i) < document_index(i - 1))
      throw Error(cat(idx, ": document index ", i, " goes backwards"));
  if (document_index(num_doc_indices_ - 1) != num_sequences_)
    throw Error(cat(idx, ": the last document index is ", document_index(num_doc_indices_ - 1),
                    ", not the sequence count ", num_sequences_));
  const int64_t item = dtype_bytes(dtype_);
  int64_t at = 0;
  for (int64_t i = 0; i < num_sequences_; ++i) {
    const int32_t len = sequence_length(i);
    if (len < 0) throw Error(cat(idx, ": sequence ", i, " has length ", len));
    if (sequence_pointer(i) != at * item)
      throw Error(cat(idx, ": sequence ", i, " starts at byte ", sequence_pointer(i), ", expected ",
                      at * item, " (sequences must be contiguous)"));
    at += len;
  }
  num_tokens_ = at;
  if (bin_.size() != num_tokens_ * item)
    throw Error(cat(bin, ": ", bin_.size(), " bytes, but its index ", idx, " describes ",
                    num_tokens_, " tokens of ", to_string(dtype_), " = ", num_tokens_ * item,
                    " bytes (", bin_.size() < num_tokens_ * item ? "truncated" : "not its data",
                    ")"));
}

std::pair<int64_t, int64_t> IndexedDataset::token_id_range() const {
  int64_t lo = 0, hi = -1;
  if (num_tokens_ == 0) return {lo, hi};
  const std::byte* p = bin_.bytes().data();
  auto scan = [&]<class T>(T) {
    T a = std::numeric_limits<T>::max(), b = std::numeric_limits<T>::lowest();
    for (int64_t i = 0; i < num_tokens_; ++i) {
      T v;
      std::memcpy(&v, p + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
      a = std::min(a, v);
      b = std::max(b, v);
    }
    lo = static_cast<int64_t>(a);
    hi = static_cast<int64_t>(b);
  };
  switch (dtype_) {
    case TokenDtype::kUint8:
      scan(uint8_t{});
      break;
    case TokenDtype::kInt8:
      scan(int8_t{});
      break;
    case TokenDtype::kInt16:
      scan(int16_t{});
      break;
    case TokenDtype::kUint16:
      scan(uint16_t{});
      break;
    case TokenDtype::kInt32:
      scan(int32_t{});
      break;
    case TokenDtype::kInt64:
      scan(int64_t{});
      break;
    case TokenDtype::kFloat32:
    case TokenDtype::kFloat64:
      MPLAN_CHECK(false, "float tokens are refused when the dataset is opened");
  }
  return {lo, hi};
}

void IndexedDataset::read(int64_t sequence, int64_t offset, std::span<int32_t> out) const {
  MPLAN_CHECK(sequence >= 0 && sequence < num_sequences_, "sequence ", sequence, " of ",
              num_sequences_);
  const int64_t count = static_cast<int64_t>(out.size());
  MPLAN_CHECK(offset >= 0 && offset + count <= sequence_length(sequence), "tokens [", offset, ", ",
              offset + count, ") of a sequence of ", sequence_length(sequence));
  const std::byte* p = bin_.bytes().data() + sequence_pointer(sequence);
  auto convert = [&]<class T>(T) {
    const std::byte* q = p + offset * static_cast<int64_t>(sizeof(T));
    for (int64_t i = 0; i < count; ++i) {
      T v;
      std::memcpy(&v, q + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
      out[static_cast<size_t>(i)] = static_cast<int32_t>(v);
    }
  };
  switch (dtype_) {
    case TokenDtype::kUint8:
      convert(uint8_t{});
      break;
    case TokenDtype::kInt8:
      convert(int8_t{});
      break;
    case TokenDtype::kInt16:
      convert(int16_t{});
      break;
    case TokenDtype::kUint16:
      convert(uint16_t{});
      break;
    case TokenDtype::kInt32:
      convert(int32_t{});
      break;
    case TokenDtype::kInt64:
      convert(int64_t{});
      break;
    default:
      MPLAN_CHECK(false, "dtype ", to_string(dtype_));
  }
}

}  // namespace mplan::exec
