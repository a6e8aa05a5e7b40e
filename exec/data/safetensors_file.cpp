// safetensors: header JSON by nlohmann (insertion order kept); data written with pwrite at each
// tensor's offset (SafetensorsWriter through the stream writer); files read in place by memory map.
#include "exec/data/safetensors_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>

#include "exec/data/mapped_file.hpp"
#include "src/common/error.hpp"
#include "src/common/json_reader.hpp"

namespace mplan::exec {

const char* to_string(SafetensorsDtype d) {
  switch (d) {
    case SafetensorsDtype::kBF16:
      return "BF16";
    case SafetensorsDtype::kF32:
      return "F32";
    case SafetensorsDtype::kI32:
      return "I32";
  }
  return "?";
}

int64_t dtype_bytes(SafetensorsDtype d) { return d == SafetensorsDtype::kBF16 ? 2 : 4; }

namespace {

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

// pwrite of all `n` bytes at `offset`, retrying short writes; false with errno set on failure.
bool write_all(int fd, const void* data, size_t n, int64_t offset) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t k = ::pwrite(fd, p, n, static_cast<off_t>(offset));
    if (k < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (k == 0) {
      errno = ENOSPC;
      return false;
    }
    p += k;
    n -= static_cast<size_t>(k);
    offset += k;
  }
  return true;
}

}  // namespace

void SafetensorsWriter::add(const std::string& name, SafetensorsDtype dtype,
                            std::vector<int64_t> shape, std::span<const std::byte> data) {
  MPLAN_CHECK(!name.empty() && name != "__metadata__", "tensor name \"", name, "\"");
  for (const Entry& e : entries_) MPLAN_CHECK(e.name != name, "tensor \"", name, "\" twice");
  for (int64_t s : shape) MPLAN_CHECK(s >= 0, "tensor \"", name, "\" has a negative dimension");
  MPLAN_CHECK(static_cast<int64_t>(data.size()) == numel(shape) * dtype_bytes(dtype), "tensor \"",
              name, "\": ", data.size(), " bytes for ", numel(shape), " elements of ",
              to_string(dtype));
  entries_.push_back({name, dtype, std::move(shape), {data.begin(), data.end()}});
}

void SafetensorsWriter::add_f32(const std::string& name, std::vector<int64_t> shape,
                                std::span<const float> v) {
  add(name, SafetensorsDtype::kF32, std::move(shape), std::as_bytes(v));
}

void SafetensorsWriter::add_i32(const std::string& name, std::vector<int64_t> shape,
                                std::span<const int32_t> v) {
  add(name, SafetensorsDtype::kI32, std::move(shape), std::as_bytes(v));
}

void SafetensorsWriter::add_bf16(const std::string& name, std::vector<int64_t> shape,
                                 std::span<const uint16_t> v) {
  add(name, SafetensorsDtype::kBF16, std::move(shape), std::as_bytes(v));
}

void SafetensorsWriter::set_metadata(const std::string& key, const std::string& value) {
  metadata_[key] = value;
}

void SafetensorsWriter::write(const std::string& path) const {
  SafetensorsStreamWriter w;
  for (const Entry& e : entries_) w.declare(e.name, e.dtype, e.shape);
  for (const auto& [k, v] : metadata_) w.set_metadata(k, v);
  const std::string tmp = cat(path, ".tmp.", ::getpid());
  try {
    w.open(tmp);
    for (const Entry& e : entries_) w.write(e.name, e.data);
    w.close();
  } catch (const Error& e) {
    std::error_code ec;
    std::filesystem::remove(tmp, ec);
    std::string what = e.what();
    const size_t at = what.find(tmp);  // name the file the caller asked for
    if (at != std::string::npos) what.replace(at, tmp.size(), path);
    throw Error(what);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    throw Error(cat(path, ": cannot write (", ec.message(), ")"));
  }
}

// ---- SafetensorsStreamWriter ------------------------------------------------------------------

SafetensorsStreamWriter::~SafetensorsStreamWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void SafetensorsStreamWriter::declare(const std::string& name, SafetensorsDtype dtype,
                                      std::vector<int64_t> shape) {
  MPLAN_CHECK(fd_ < 0, "declare after open");
  MPLAN_CHECK(!name.empty() && name != "__metadata__", "tensor name \"", name, "\"");
  for (const Decl& d : decls_) MPLAN_CHECK(d.name != name, "tensor \"", name, "\" twice");
  for (int64_t x : shape) MPLAN_CHECK(x >= 0, "tensor \"", name, "\" has a negative dimension");
  Decl d{name, dtype, std::move(shape)};
  d.bytes = numel(d.shape) * dtype_bytes(dtype);
  decls_.push_back(std::move(d));
}

void SafetensorsStreamWriter::set_metadata(const std::string& key, const std::string& value) {
  MPLAN_CHECK(fd_ < 0, "metadata after open");
  metadata_[key] = value;
}

void SafetensorsStreamWriter::fail(const std::string& what, int err) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  throw Error(cat(path_, ": cannot ", what, " (", std::strerror(err), ")"));
}

void SafetensorsStreamWriter::open(const std::string& path) {
  static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");
  MPLAN_CHECK(fd_ < 0 && path_.empty(), "open twice");
  path_ = path;
  Json header = Json::object();
  if (!metadata_.empty()) {
    Json m = Json::object();
    for (const auto& [k, v] : metadata_) m[k] = v;
    header["__metadata__"] = m;
  }
  // Data laid out by dtype size, largest first (as safetensors' own writer does), so every
  // tensor starts at a multiple of its element size; the header keeps the declaration order.
  std::vector<size_t> order(decls_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return dtype_bytes(decls_[a].dtype) > dtype_bytes(decls_[b].dtype);
  });
  data_bytes_ = 0;
  for (size_t i : order) {
    decls_[i].begin = data_bytes_;
    data_bytes_ += decls_[i].bytes;
  }
  for (const Decl& d : decls_)
    header[d.name] = {{"dtype", to_string(d.dtype)},
                      {"shape", d.shape},
                      {"data_offsets", {d.begin, d.begin + d.bytes}}};
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  data_start_ = 8 + static_cast<int64_t>(text.size());
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("create", errno);
  const uint64_t n = text.size();
  std::string head(reinterpret_cast<const char*>(&n), 8);
  head += text;
  if (!write_all(fd_, head.data(), head.size(), 0)) fail("write", errno);
}

void SafetensorsStreamWriter::write(const std::string& name, std::span<const std::byte> data) {
  MPLAN_CHECK(fd_ >= 0, "write before open (or after a failure)");
  auto it =
      std::find_if(decls_.begin(), decls_.end(), [&](const Decl& d) { return d.name == name; });
  MPLAN_CHECK(it != decls_.end(), "tensor \"", name, "\" was not declared");
  MPLAN_CHECK(!it->written, "tensor \"", name, "\" written twice");
  MPLAN_CHECK(static_cast<int64_t>(data.size()) == it->bytes, "tensor \"", name,
              "\": ", data.size(), " bytes for ", it->bytes);
  if (!write_all(fd_, data.data(), data.size(), data_start_ + it->begin)) fail("write", errno);
  it->written = true;
}

void SafetensorsStreamWriter::close() {
  MPLAN_CHECK(fd_ >= 0, "close before open (or after a failure)");
  for (const Decl& d : decls_) MPLAN_CHECK(d.written, "tensor \"", d.name, "\" was not written");
  // A file with no data still ends at data_start_ (the header's padding is written).
  if (::fsync(fd_) != 0) fail("write", errno);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) throw Error(cat(path_, ": cannot write (", std::strerror(errno), ")"));
}

// ---- reading ----------------------------------------------------------------------------------

SafetensorsFile::SafetensorsFile(const std::string& path) : file_(path) {
  const auto bad = [&](const std::string& why) {
    return Error(cat(path, ": not a valid safetensors file (", why, ")"));
  };
  if (file_.size() < 8) throw bad("shorter than its 8-byte header length");
  const auto n = file_.load<uint64_t>(0);
  if (n > static_cast<uint64_t>(file_.size() - 8)) throw bad("header longer than the file");
  const std::string text(reinterpret_cast<const char*>(file_.bytes().data()) + 8, n);
  Json header;
  try {
    header = Json::parse(text);
  } catch (const std::exception&) {
    throw bad("header is not JSON");
  }
  if (!header.is_object()) throw bad("header is not a JSON object");
  const int64_t data_start = 8 + static_cast<int64_t>(n);
  const int64_t data_bytes = file_.size() - data_start;
  std::vector<std::pair<int64_t, int64_t>> spans;
  for (const auto& [name, v] : header.items()) {
    if (name == "__metadata__") {
      if (!v.is_object()) throw bad("__metadata__ is not an object");
      for (const auto& [k, s] : v.items()) {
        if (!s.is_string()) throw bad("metadata \"" + k + "\" is not a string");
        metadata_[k] = s.get<std::string>();
      }
      continue;
    }
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") ||
        !v.contains("data_offsets"))
      throw bad("tensor \"" + name + "\" lacks dtype, shape or data_offsets");
    Entry t;
    const std::string dt = v["dtype"].is_string() ? v["dtype"].get<std::string>() : "";
    if (dt == "BF16")
      t.dtype = SafetensorsDtype::kBF16;
    else if (dt == "F32")
      t.dtype = SafetensorsDtype::kF32;
    else if (dt == "I32")
      t.dtype = SafetensorsDtype::kI32;
    else
      throw bad("tensor \"" + name + "\" has dtype \"" + dt + "\"");
    if (!v["shape"].is_array()) throw bad("bad shape of \"" + name + "\"");
    for (const Json& x : v["shape"]) {
      if (!x.is_number_integer() || x.get<int64_t>() < 0)
        throw bad("bad shape of \"" + name + "\"");
      t.shape.push_back(x.get<int64_t>());
    }
    const Json& off = v["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_integer() ||
        !off[1].is_number_integer())
      throw bad("bad data_offsets of \"" + name + "\"");
    const int64_t b = off[0].get<int64_t>(), e = off[1].get<int64_t>();
    if (b < 0 || e < b || e > data_bytes)
      throw bad("data_offsets of \"" + name + "\" out of range");
    if (e - b != numel(t.shape) * dtype_bytes(t.dtype))
      throw bad("\"" + name + "\" has " + std::to_string(e - b) + " bytes for its shape");
    t.data = file_.bytes().subspan(static_cast<size_t>(data_start + b), static_cast<size_t>(e - b));
    spans.emplace_back(b, e);
    names_.push_back(name);
    entries_.emplace(name, std::move(t));
  }
  std::sort(spans.begin(), spans.end());
  int64_t at = 0;
  for (const auto& [b, e] : spans) {
    if (b != at) throw bad("tensor data has gaps or overlaps");
    at = e;
  }
  if (at != data_bytes) throw bad("tensor data does not fill the file");
}

const SafetensorsFile::Entry* SafetensorsFile::find(const std::string& name) const {
  auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : &it->second;
}

SafetensorsContents read_safetensors(const std::string& path) {
  const SafetensorsFile file(path);
  SafetensorsContents out;
  out.metadata = file.metadata();
  for (const std::string& name : file.names()) {
    const SafetensorsFile::Entry& e = *file.find(name);
    out.tensors.emplace(name, SafetensorsTensor{e.dtype, e.shape, {e.data.begin(), e.data.end()}});
  }
  return out;
}

}  // namespace mplan::exec
