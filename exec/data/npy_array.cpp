// NpyArray: the .npy header ("\x93NUMPY", version 1.0, u16 header length, a Python dict literal
// padded with spaces to a multiple of 64 bytes and ending in '\n') and element access.
#include "exec/data/npy_array.hpp"

#include <unistd.h>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <regex>

#include "src/common/error.hpp"

namespace mplan::exec {
namespace {

const char* descr(NpyDtype d) {
  switch (d) {
    case NpyDtype::kI16:
      return "<i2";
    case NpyDtype::kI32:
      return "<i4";
    case NpyDtype::kI64:
      return "<i8";
    case NpyDtype::kU16:
      return "<u2";
    case NpyDtype::kU32:
      return "<u4";
  }
  return "?";
}

}  // namespace

int64_t npy_item_bytes(NpyDtype d) {
  switch (d) {
    case NpyDtype::kI16:
    case NpyDtype::kU16:
      return 2;
    case NpyDtype::kI32:
    case NpyDtype::kU32:
      return 4;
    case NpyDtype::kI64:
      return 8;
  }
  return 0;
}

NpyArray::NpyArray(NpyDtype dtype, std::vector<int64_t> shape) : dtype_(dtype), shape_(shape) {
  numel_ = 1;
  for (int64_t s : shape_) numel_ *= s;
  owned_.assign(static_cast<size_t>(numel_ * npy_item_bytes(dtype_)), std::byte{0});
  data_ = owned_.data();
}

int64_t NpyArray::at(int64_t i) const {
  const std::byte* p = data_ + i * npy_item_bytes(dtype_);
  switch (dtype_) {
    case NpyDtype::kI16: {
      int16_t v;
      std::memcpy(&v, p, 2);
      return v;
    }
    case NpyDtype::kI32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case NpyDtype::kI64: {
      int64_t v;
      std::memcpy(&v, p, 8);
      return v;
    }
    case NpyDtype::kU16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return v;
    }
    case NpyDtype::kU32: {
      uint32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
  }
  return 0;
}

void NpyArray::set(int64_t i, int64_t v) {
  MPLAN_CHECK(!mapped_ && i >= 0 && i < numel_, "set(", i, ") of ", numel_);
  std::byte* p = owned_.data() + i * npy_item_bytes(dtype_);
  switch (dtype_) {
    case NpyDtype::kI16: {
      auto x = static_cast<int16_t>(v);
      std::memcpy(p, &x, 2);
      break;
    }
    case NpyDtype::kI32: {
      auto x = static_cast<int32_t>(v);
      std::memcpy(p, &x, 4);
      break;
    }
    case NpyDtype::kI64: {
      std::memcpy(p, &v, 8);
      break;
    }
    case NpyDtype::kU16: {
      auto x = static_cast<uint16_t>(v);
      std::memcpy(p, &x, 2);
      break;
    }
    case NpyDtype::kU32: {
      auto x = static_cast<uint32_t>(v);
      std::memcpy(p, &x, 4);
      break;
    }
  }
}

void NpyArray::save(const std::string& path) const {
  std::string shape = "(";
  for (size_t i = 0; i < shape_.size(); ++i) shape += std::to_string(shape_[i]) + ", ";
  if (shape_.size() > 1)
    shape.resize(shape.size() - 2);
  else if (shape_.size() == 1)
    shape.resize(shape.size() - 1);  // "(5,)"
  shape += ")";
  std::string header =
      cat("{'descr': '", descr(dtype_), "', 'fortran_order': False, 'shape': ", shape, ", }");
  const size_t prefix = 10;  // magic 6 + version 2 + header length 2
  size_t total = prefix + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  const std::string tmp = cat(path, ".tmp.", ::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) throw Error(cat(tmp, ": cannot create (", std::strerror(errno), ")"));
  const uint16_t len = static_cast<uint16_t>(header.size());
  const unsigned char head[10] = {0x93,
                                  'N',
                                  'U',
                                  'M',
                                  'P',
                                  'Y',
                                  1,
                                  0,
                                  static_cast<unsigned char>(len & 0xff),
                                  static_cast<unsigned char>(len >> 8)};
  const size_t bytes = static_cast<size_t>(numel_ * npy_item_bytes(dtype_));
  bool ok = std::fwrite(head, 1, 10, f) == 10 &&
            std::fwrite(header.data(), 1, header.size(), f) == header.size() &&
            (bytes == 0 || std::fwrite(data_, 1, bytes, f) == bytes);
  ok = (std::fclose(f) == 0) && ok;
  std::error_code ec;
  if (ok) std::filesystem::rename(tmp, path, ec);
  if (!ok || ec) {
    std::filesystem::remove(tmp, ec);
    throw Error(cat(path, ": cannot write (", std::strerror(errno), ")"));
  }
}

NpyArray NpyArray::load(const std::string& path) {
  auto file = std::make_shared<MappedFile>(path);
  const auto bytes = file->bytes();
  const auto bad = [&](const std::string& why) {
    return Error(cat(path, ": not a usable .npy file (", why, ")"));
  };
  if (bytes.size() < 10 || std::memcmp(bytes.data(), "\x93NUMPY", 6) != 0) throw bad("no magic");
  if (file->load<uint8_t>(6) != 1) throw bad("only format version 1.0 is read");
  const size_t hlen = file->load<uint16_t>(8);
  if (10 + hlen > bytes.size()) throw bad("truncated header");
  const std::string header(reinterpret_cast<const char*>(bytes.data()) + 10, hlen);
  static const std::regex re(
      R"(\{'descr': '([<|][iu][248])', 'fortran_order': False, 'shape': \(([0-9, ]*)\), \}\s*)");
  std::smatch m;
  if (!std::regex_match(header, m, re)) throw bad("unexpected header");
  NpyArray a;
  const std::string d = m[1].str().substr(1);
  if (d == "i2")
    a.dtype_ = NpyDtype::kI16;
  else if (d == "i4")
    a.dtype_ = NpyDtype::kI32;
  else if (d == "i8")
    a.dtype_ = NpyDtype::kI64;
  else if (d == "u2")
    a.dtype_ = NpyDtype::kU16;
  else if (d == "u4")
    a.dtype_ = NpyDtype::kU32;
  else
    throw bad("dtype " + d);
  const std::string dims = m[2].str();
  a.numel_ = 1;
  for (size_t at = 0; at < dims.size();) {
    while (at < dims.size() && (dims[at] == ',' || dims[at] == ' ')) ++at;
    if (at >= dims.size()) break;
    size_t end = at;
    while (end < dims.size() && dims[end] >= '0' && dims[end] <= '9') ++end;
    const int64_t v = std::stoll(dims.substr(at, end - at));
    a.shape_.push_back(v);
    a.numel_ *= v;
    at = end;
  }
  if (a.numel_ * npy_item_bytes(a.dtype_) != static_cast<int64_t>(bytes.size() - 10 - hlen))
    throw bad(cat(bytes.size() - 10 - hlen, " data bytes for ", a.numel_, " elements"));
  a.data_ = bytes.data() + 10 + hlen;
  a.mapped_ = std::move(file);
  return a;
}

}  // namespace mplan::exec
