// IndexedDatasetWriter: .bin streamed through a buffer, .idx written at finalize().
#include "exec/data/indexed_dataset_writer.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>

#include "src/common/error.hpp"

namespace mplan::exec {
namespace {

std::string tmp_name(const std::string& path) { return path + ".tmp"; }

void write_all(std::FILE* f, const void* data, size_t bytes, const std::string& path) {
  if (bytes > 0 && std::fwrite(data, 1, bytes, f) != bytes)
    throw Error(cat(path, ": write failed (", std::strerror(errno), ")"));
}

template <class T>
void put(std::vector<std::byte>& out, T v) {
  const auto* p = reinterpret_cast<const std::byte*>(&v);
  out.insert(out.end(), p, p + sizeof(T));
}

}  // namespace

IndexedDatasetWriter::IndexedDatasetWriter(std::string prefix, TokenDtype dtype)
    : prefix_(std::move(prefix)), dtype_(dtype) {
  if (dtype == TokenDtype::kFloat32 || dtype == TokenDtype::kFloat64)
    throw Error(cat(prefix_, ".bin: tokens cannot be stored as ", to_string(dtype)));
  const std::string bin = tmp_name(prefix_ + ".bin");
  bin_ = std::fopen(bin.c_str(), "wb");
  if (bin_ == nullptr) throw Error(cat(bin, ": cannot create (", std::strerror(errno), ")"));
}

IndexedDatasetWriter::~IndexedDatasetWriter() {
  if (bin_ != nullptr) std::fclose(bin_);
  if (!finalized_) {
    std::error_code ec;
    std::filesystem::remove(tmp_name(prefix_ + ".bin"), ec);
    std::filesystem::remove(tmp_name(prefix_ + ".idx"), ec);
  }
}

void IndexedDatasetWriter::add_document(std::span<const int32_t> tokens) {
  const auto n = static_cast<int32_t>(tokens.size());
  MPLAN_CHECK(tokens.size() <= static_cast<size_t>(std::numeric_limits<int32_t>::max()),
              "a sequence of ", tokens.size(), " tokens");
  add_document(tokens,
               tokens.empty() ? std::span<const int32_t>() : std::span<const int32_t>(&n, 1));
}

void IndexedDatasetWriter::add_document(std::span<const int32_t> tokens,
                                        std::span<const int32_t> sequence_lengths) {
  MPLAN_CHECK(!finalized_, "add_document after finalize");
  int64_t sum = 0;
  for (int32_t len : sequence_lengths) {
    MPLAN_CHECK(len >= 0, "sequence length ", len);
    sum += len;
  }
  MPLAN_CHECK(sum == static_cast<int64_t>(tokens.size()), "sequence lengths sum to ", sum, " for ",
              tokens.size(), " tokens");
  if (!tokens.empty()) {
    int64_t lo = 0, hi = 0;
    switch (dtype_) {
      case TokenDtype::kUint8:
        hi = 255;
        break;
      case TokenDtype::kInt8:
        lo = -128, hi = 127;
        break;
      case TokenDtype::kInt16:
        lo = -32768, hi = 32767;
        break;
      case TokenDtype::kUint16:
        hi = 65535;
        break;
      default:
        lo = std::numeric_limits<int32_t>::min(), hi = std::numeric_limits<int32_t>::max();
    }
    const int64_t item = dtype_bytes(dtype_);
    buffer_.clear();
    buffer_.reserve(tokens.size() * static_cast<size_t>(item));
    for (int32_t t : tokens) {
      if (t < lo || t > hi)
        throw Error(cat(prefix_, ".bin: token id ", t, " does not fit dtype ", to_string(dtype_)));
      switch (dtype_) {
        case TokenDtype::kUint8:
          put(buffer_, static_cast<uint8_t>(t));
          break;
        case TokenDtype::kInt8:
          put(buffer_, static_cast<int8_t>(t));
          break;
        case TokenDtype::kInt16:
          put(buffer_, static_cast<int16_t>(t));
          break;
        case TokenDtype::kUint16:
          put(buffer_, static_cast<uint16_t>(t));
          break;
        case TokenDtype::kInt64:
          put(buffer_, static_cast<int64_t>(t));
          break;
        default:
          put(buffer_, t);
      }
    }
    write_all(bin_, buffer_.data(), buffer_.size(), tmp_name(prefix_ + ".bin"));
    num_tokens_ += static_cast<int64_t>(tokens.size());
  }
  lengths_.insert(lengths_.end(), sequence_lengths.begin(), sequence_lengths.end());
  document_indices_.push_back(static_cast<int64_t>(lengths_.size()));
}

void IndexedDatasetWriter::finalize() {
  MPLAN_CHECK(!finalized_, "finalize twice");
  const std::string bin_tmp = tmp_name(prefix_ + ".bin"), idx_tmp = tmp_name(prefix_ + ".idx");
  const bool flushed = std::fflush(bin_) == 0;
  const bool closed = std::fclose(bin_) == 0;
  bin_ = nullptr;
  if (!flushed || !closed) throw Error(cat(bin_tmp, ": write failed (", std::strerror(errno), ")"));

  std::vector<std::byte> idx;
  idx.reserve(static_cast<size_t>(kIndexHeaderBytes) + 12 * lengths_.size() +
              8 * document_indices_.size());
  for (char c : kIndexMagic) idx.push_back(static_cast<std::byte>(c));
  put(idx, uint64_t{1});
  put(idx, static_cast<uint8_t>(dtype_));
  put(idx, static_cast<uint64_t>(lengths_.size()));
  put(idx, static_cast<uint64_t>(document_indices_.size()));
  for (int32_t len : lengths_) put(idx, len);
  int64_t pointer = 0;
  for (int32_t len : lengths_) {
    put(idx, pointer);
    pointer += int64_t{len} * dtype_bytes(dtype_);
  }
  for (int64_t d : document_indices_) put(idx, d);
  std::FILE* f = std::fopen(idx_tmp.c_str(), "wb");
  if (f == nullptr) throw Error(cat(idx_tmp, ": cannot create (", std::strerror(errno), ")"));
  try {
    write_all(f, idx.data(), idx.size(), idx_tmp);
  } catch (...) {
    std::fclose(f);
    throw;
  }
  if (std::fclose(f) != 0) throw Error(cat(idx_tmp, ": write failed (", std::strerror(errno), ")"));
  std::error_code ec;
  std::filesystem::rename(bin_tmp, prefix_ + ".bin", ec);
  if (!ec) std::filesystem::rename(idx_tmp, prefix_ + ".idx", ec);
  if (ec) throw Error(cat(prefix_, ".bin/.idx: cannot rename into place (", ec.message(), ")"));
  finalized_ = true;
}

}  // namespace mplan::exec
