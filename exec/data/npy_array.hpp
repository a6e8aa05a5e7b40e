// NpyArray: a 1-D or 2-D integer array held in memory or mapped from a NumPy .npy file (format
// 1.0, C order, little-endian), the format in which Megatron-LM caches its dataset indices.
// Invariant: at(i) is in bounds for i < numel() and reads the element as int64 whatever the
// stored dtype (i2, i4, i8, u2, u4).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "exec/data/mapped_file.hpp"

namespace mplan::exec {

enum class NpyDtype { kI16, kI32, kI64, kU16, kU32 };

class NpyArray {
 public:
  NpyArray() = default;
  NpyArray(NpyArray&&) = default;  // moves keep data_ valid (the vector's buffer moves with it)
  NpyArray& operator=(NpyArray&&) = default;
  NpyArray(const NpyArray&) = delete;
  NpyArray& operator=(const NpyArray&) = delete;
  // An in-memory array of `dtype` with `shape`, every element 0.
  NpyArray(NpyDtype dtype, std::vector<int64_t> shape);
  // Maps `path`; an unreadable or malformed file is an Error naming it.
  static NpyArray load(const std::string& path);

  NpyDtype dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t numel() const { return numel_; }
  int64_t at(int64_t i) const;
  void set(int64_t i, int64_t v);  // in-memory arrays only
  // Writes the array as a .npy file under a temporary name, then renames it to `path`.
  void save(const std::string& path) const;

 private:
  NpyDtype dtype_ = NpyDtype::kI64;
  std::vector<int64_t> shape_;
  int64_t numel_ = 0;
  std::vector<std::byte> owned_;
  std::shared_ptr<MappedFile> mapped_;
  const std::byte* data_ = nullptr;  // owned_.data() or inside mapped_
};

int64_t npy_item_bytes(NpyDtype d);

}  // namespace mplan::exec
