// MappedFile: a whole file mapped read-only into memory, unmapped when the object dies (RAII).
// Invariant: bytes() stays valid and unchanged for the object's lifetime; an empty file maps to an
// empty span. Failing to open or map is an mplan::Error naming the file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>

namespace mplan::exec {

class MappedFile {
 public:
  explicit MappedFile(std::string path);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  int64_t size() const { return static_cast<int64_t>(size_); }
  std::span<const std::byte> bytes() const { return {data_, size_}; }

  // The little-endian value of type T at byte `offset` (no alignment needed).
  template <class T>
  T load(int64_t offset) const {
    T v;
    std::memcpy(&v, data_ + offset, sizeof(T));
    return v;
  }

 private:
  std::string path_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
  void release() noexcept;
};

}  // namespace mplan::exec
