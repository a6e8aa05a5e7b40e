// safetensors: the tensor file format PyTorch's `safetensors` reads. Layout: u64 little-endian N,
// then N bytes of JSON header {"__metadata__": {string: string}, NAME: {"dtype": "BF16"|"F32"|
// "I32", "shape": [...], "data_offsets": [begin, end]}, ...} padded with spaces to a multiple of
// 8, then the raw little-endian data, tensors back to back, largest dtype first (so each starts at
// a multiple of its element size), in the order added within a dtype size.
// Invariant: a written file's offsets cover the data exactly, with no gaps or overlaps, and every
// tensor's byte count equals its shape's element count times the dtype size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace mplan::exec {

enum class SafetensorsDtype { kBF16, kF32, kI32 };
const char* to_string(SafetensorsDtype d);  // "BF16", "F32", "I32"
int64_t dtype_bytes(SafetensorsDtype d);

class SafetensorsWriter {
 public:
  // Copies `data` (its size must be the shape's element count times the dtype size). Names are
  // unique and not "__metadata__"; a broken rule is an InternalError.
  void add(const std::string& name, SafetensorsDtype dtype, std::vector<int64_t> shape,
           std::span<const std::byte> data);
  void add_f32(const std::string& name, std::vector<int64_t> shape, std::span<const float> v);
  void add_i32(const std::string& name, std::vector<int64_t> shape, std::span<const int32_t> v);
  // bf16 values as their raw 16 bits.
  void add_bf16(const std::string& name, std::vector<int64_t> shape, std::span<const uint16_t> v);
  void set_metadata(const std::string& key, const std::string& value);
  // Writes the file under a temporary name, then renames it to `path` (Error naming it on
  // failure; a failed write leaves no file).
  void write(const std::string& path) const;

 private:
  struct Entry {
    std::string name;
    SafetensorsDtype dtype;
    std::vector<int64_t> shape;
    std::vector<std::byte> data;
  };
  std::vector<Entry> entries_;
  std::map<std::string, std::string> metadata_;
};

// A parsed file, for tests and for loading back.
struct SafetensorsTensor {
  SafetensorsDtype dtype;
  std::vector<int64_t> shape;
  std::vector<std::byte> data;
};
struct SafetensorsContents {
  std::map<std::string, std::string> metadata;
  std::map<std::string, SafetensorsTensor> tensors;
};
// Reads and checks a whole file (header, dtypes, shapes, offsets); Error naming it otherwise.
SafetensorsContents read_safetensors(const std::string& path);

}  // namespace mplan::exec
