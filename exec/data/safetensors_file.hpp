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
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "exec/data/mapped_file.hpp"

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

// Writes a file whose tensors are declared up front, then their data one tensor at a time in any
// order (checkpoints: one full tensor in memory at a time). The layout is SafetensorsWriter's.
// Errors (a full disk, a missing tensor) are mplan::Error naming the file; the caller removes it.
class SafetensorsStreamWriter {
 public:
  SafetensorsStreamWriter() = default;
  ~SafetensorsStreamWriter();
  SafetensorsStreamWriter(const SafetensorsStreamWriter&) = delete;
  SafetensorsStreamWriter& operator=(const SafetensorsStreamWriter&) = delete;

  // Before open(): the tensors in header order, and the metadata.
  void declare(const std::string& name, SafetensorsDtype dtype, std::vector<int64_t> shape);
  void set_metadata(const std::string& key, const std::string& value);
  // Creates `path` (replacing a file there) and writes the header.
  void open(const std::string& path);
  // The data of declared tensor `name` (its exact byte count), once.
  void write(const std::string& name, std::span<const std::byte> data);
  // Checks that every tensor was written, flushes the file to the disk (fsync) and closes it.
  void close();
  int64_t file_bytes() const { return data_start_ + data_bytes_; }

 private:
  struct Decl {
    std::string name;
    SafetensorsDtype dtype;
    std::vector<int64_t> shape;
    int64_t begin = 0, bytes = 0;
    bool written = false;
  };
  std::vector<Decl> decls_;
  std::map<std::string, std::string> metadata_;
  std::string path_;
  int fd_ = -1;
  int64_t data_start_ = 0, data_bytes_ = 0;
  void fail(const std::string& what, int err);
};

// A file mapped read-only and checked (header, dtypes, shapes, offsets) without copying its data:
// tensors are read in place (checkpoints read only the elements a rank needs).
class SafetensorsFile {
 public:
  struct Entry {
    SafetensorsDtype dtype;
    std::vector<int64_t> shape;
    std::span<const std::byte> data;
  };
  // Error naming the file when it cannot be read or is not a valid safetensors file.
  explicit SafetensorsFile(const std::string& path);
  const std::string& path() const { return file_.path(); }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::vector<std::string>& names() const { return names_; }  // in header order
  // The tensor `name`, or null.
  const Entry* find(const std::string& name) const;

 private:
  MappedFile file_;
  std::map<std::string, std::string> metadata_;
  std::vector<std::string> names_;
  std::map<std::string, Entry> entries_;
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
