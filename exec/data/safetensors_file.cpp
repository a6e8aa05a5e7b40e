// safetensors: header JSON by nlohmann (insertion order kept), data copied in add() order.
#include "exec/data/safetensors_file.hpp"

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
  static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");
  Json header = Json::object();
  if (!metadata_.empty()) {
    Json m = Json::object();
    for (const auto& [k, v] : metadata_) m[k] = v;
    header["__metadata__"] = m;
  }
  // Data laid out by dtype size, largest first (as safetensors' own writer does), so every
  // tensor starts at a multiple of its element size; the header keeps the order of add().
  std::vector<size_t> order(entries_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return dtype_bytes(entries_[a].dtype) > dtype_bytes(entries_[b].dtype);
  });
  std::vector<int64_t> begin(entries_.size());
  int64_t offset = 0;
  for (size_t i : order) {
    begin[i] = offset;
    offset += static_cast<int64_t>(entries_[i].data.size());
  }
  for (size_t i = 0; i < entries_.size(); ++i) {
    const Entry& e = entries_[i];
    header[e.name] = {{"dtype", to_string(e.dtype)},
                      {"shape", e.shape},
                      {"data_offsets", {begin[i], begin[i] + static_cast<int64_t>(e.data.size())}}};
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const std::string tmp = cat(path, ".tmp.", ::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) throw Error(cat(path, ": cannot create (", std::strerror(errno), ")"));
  uint64_t n = text.size();
  bool ok =
      std::fwrite(&n, 8, 1, f) == 1 && std::fwrite(text.data(), 1, text.size(), f) == text.size();
  for (size_t i : order) {
    const Entry& e = entries_[i];
    ok = ok && (e.data.empty() || std::fwrite(e.data.data(), 1, e.data.size(), f) == e.data.size());
  }
  const int err = errno;
  ok = (std::fclose(f) == 0) && ok;
  std::error_code ec;
  if (ok) std::filesystem::rename(tmp, path, ec);
  if (!ok || ec) {
    std::filesystem::remove(tmp, ec);
    throw Error(cat(path, ": cannot write (", std::strerror(err ? err : errno), ")"));
  }
}

SafetensorsContents read_safetensors(const std::string& path) {
  MappedFile file(path);
  const auto bad = [&](const std::string& why) {
    return Error(cat(path, ": not a valid safetensors file (", why, ")"));
  };
  if (file.size() < 8) throw bad("shorter than its 8-byte header length");
  const auto n = file.load<uint64_t>(0);
  if (n > static_cast<uint64_t>(file.size() - 8)) throw bad("header longer than the file");
  const std::string text(reinterpret_cast<const char*>(file.bytes().data()) + 8, n);
  Json header;
  try {
    header = Json::parse(text);
  } catch (const std::exception&) {
    throw bad("header is not JSON");
  }
  if (!header.is_object()) throw bad("header is not a JSON object");
  const int64_t data_start = 8 + static_cast<int64_t>(n);
  const int64_t data_bytes = file.size() - data_start;
  SafetensorsContents out;
  std::vector<std::pair<int64_t, int64_t>> spans;
  for (const auto& [name, v] : header.items()) {
    if (name == "__metadata__") {
      if (!v.is_object()) throw bad("__metadata__ is not an object");
      for (const auto& [k, s] : v.items()) {
        if (!s.is_string()) throw bad("metadata \"" + k + "\" is not a string");
        out.metadata[k] = s.get<std::string>();
      }
      continue;
    }
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") ||
        !v.contains("data_offsets"))
      throw bad("tensor \"" + name + "\" lacks dtype, shape or data_offsets");
    SafetensorsTensor t;
    const std::string dt = v["dtype"].is_string() ? v["dtype"].get<std::string>() : "";
    if (dt == "BF16")
      t.dtype = SafetensorsDtype::kBF16;
    else if (dt == "F32")
      t.dtype = SafetensorsDtype::kF32;
    else if (dt == "I32")
      t.dtype = SafetensorsDtype::kI32;
    else
      throw bad("tensor \"" + name + "\" has dtype \"" + dt + "\"");
    for (const Json& s : v["shape"]) {
      if (!s.is_number_integer() || s.get<int64_t>() < 0)
        throw bad("bad shape of \"" + name + "\"");
      t.shape.push_back(s.get<int64_t>());
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
    const std::byte* p = file.bytes().data() + data_start;
    t.data.assign(p + b, p + e);
    spans.emplace_back(b, e);
    out.tensors.emplace(name, std::move(t));
  }
  std::sort(spans.begin(), spans.end());
  int64_t at = 0;
  for (const auto& [b, e] : spans) {
    if (b != at) throw bad("tensor data has gaps or overlaps");
    at = e;
  }
  if (at != data_bytes) throw bad("tensor data does not fill the file");
  return out;
}

}  // namespace mplan::exec
