// safetensors: a written file parsed back byte for byte (header layout, 8-byte alignment, data
// ordered by dtype size so each tensor is aligned, metadata), damaged files refused naming the
// file; the file read by an independent reader of the format's rules (the checks of the
// safetensors library, which PyTorch's load_file runs) with the values PyTorch must see, on every
// machine; and, as an optional cross-check where python3 has torch and safetensors, PyTorch
// itself loading it (skipped with what is missing otherwise).
#include "exec/data/safetensors_file.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "src/common/error.hpp"
#include "tests/exec/data/data_test_util.hpp"

namespace mplan::exec {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

SafetensorsWriter example() {
  SafetensorsWriter w;
  const std::vector<float> f{1.5f, -2.0f, 0.25f, 8.0f, 0.0f, -0.5f};
  const std::vector<int32_t> i{7, -9};
  const std::vector<uint16_t> b{0x3F80, 0xC000, 0x3E80};  // bf16 1.0, -2.0, 0.25
  w.add_f32("embedding.weight", {2, 3}, f);
  w.add_i32("step", {2}, i);
  w.add_bf16("norm.bias", {3}, b);
  w.add_f32("head.weight", {2}, std::vector<float>{3.0f, -1.0f});  // placed before the bf16
  w.set_metadata("format", "pt");
  return w;
}

TEST(Safetensors, Layout) {
  test::TempDir dir;
  example().write(dir / "m.safetensors");
  const std::string bytes = test::slurp(dir / "m.safetensors");
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  const std::string header = bytes.substr(8, n);
  EXPECT_THAT(header,
              StartsWith("{\"__metadata__\":{\"format\":\"pt\"},\"embedding.weight\":{\"dtype\":"
                         "\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},\"step\":{\"dtype\":"
                         "\"I32\",\"shape\":[2],\"data_offsets\":[24,32]},\"norm.bias\":{\"dtype\":"
                         "\"BF16\",\"shape\":[3],\"data_offsets\":[40,46]},\"head.weight\":"
                         "{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[32,40]}}"));
  EXPECT_EQ(bytes.size(), 8 + n + 46);
  float first = 0;
  std::memcpy(&first, bytes.data() + 8 + n, 4);
  EXPECT_EQ(first, 1.5f);
}

TEST(Safetensors, ReadsBack) {
  test::TempDir dir;
  example().write(dir / "m.safetensors");
  const SafetensorsContents c = read_safetensors(dir / "m.safetensors");
  EXPECT_EQ(c.metadata.at("format"), "pt");
  ASSERT_EQ(c.tensors.size(), 4u);
  const SafetensorsTensor& b = c.tensors.at("norm.bias");
  EXPECT_EQ(b.dtype, SafetensorsDtype::kBF16);
  EXPECT_EQ(b.shape, std::vector<int64_t>{3});
  uint16_t v = 0;
  std::memcpy(&v, b.data.data() + 2, 2);
  EXPECT_EQ(v, 0xC000);
  const SafetensorsTensor& s = c.tensors.at("step");
  int32_t step = 0;
  std::memcpy(&step, s.data.data() + 4, 4);
  EXPECT_EQ(step, -9);
}

TEST(Safetensors, DamagedFiles) {
  test::TempDir dir;
  example().write(dir / "m.safetensors");
  const std::string bytes = test::slurp(dir / "m.safetensors");
  test::write_file(dir / "cut.safetensors", bytes.substr(0, bytes.size() - 2));
  EXPECT_THAT(test::error_of([&] { read_safetensors(dir / "cut.safetensors"); }),
              StartsWith(dir / "cut.safetensors" + ": not a valid safetensors file"));
  test::write_file(dir / "x.safetensors", "tiny");
  EXPECT_THAT(test::error_of([&] { read_safetensors(dir / "x.safetensors"); }),
              HasSubstr("shorter than its 8-byte header length"));
}

TEST(Safetensors, StreamWriterWritesTheSameFileInAnyOrder) {
  test::TempDir dir;
  example().write(dir / "whole.safetensors");
  SafetensorsStreamWriter w;
  w.declare("embedding.weight", SafetensorsDtype::kF32, {2, 3});
  w.declare("step", SafetensorsDtype::kI32, {2});
  w.declare("norm.bias", SafetensorsDtype::kBF16, {3});
  w.declare("head.weight", SafetensorsDtype::kF32, {2});
  w.set_metadata("format", "pt");
  w.open(dir / "stream.safetensors");
  // Data one tensor at a time, out of order.
  const std::vector<float> head{3.0f, -1.0f}, emb{1.5f, -2.0f, 0.25f, 8.0f, 0.0f, -0.5f};
  const std::vector<uint16_t> bias{0x3F80, 0xC000, 0x3E80};
  const std::vector<int32_t> step{7, -9};
  w.write("head.weight", std::as_bytes(std::span(head)));
  w.write("norm.bias", std::as_bytes(std::span(bias)));
  w.write("embedding.weight", std::as_bytes(std::span(emb)));
  EXPECT_THAT(test::error_of([&] {
                try {
                  w.close();
                } catch (const InternalError& e) {
                  throw Error(e.what());
                }
              }),
              HasSubstr("tensor \"step\" was not written"));
  w.write("step", std::as_bytes(std::span(step)));
  w.close();
  EXPECT_EQ(w.file_bytes(), static_cast<int64_t>(test::slurp(dir / "whole.safetensors").size()));
  EXPECT_TRUE(test::slurp(dir / "stream.safetensors") == test::slurp(dir / "whole.safetensors"));
  // Read in place.
  const SafetensorsFile f(dir / "stream.safetensors");
  EXPECT_EQ(f.names(),
            (std::vector<std::string>{"embedding.weight", "step", "norm.bias", "head.weight"}));
  const SafetensorsFile::Entry* e = f.find("head.weight");
  ASSERT_NE(e, nullptr);
  float v[2];
  std::memcpy(v, e->data.data(), 8);
  EXPECT_EQ(v[0], 3.0f);
  EXPECT_EQ(f.find("absent"), nullptr);
  // A write that fails names the file.
  SafetensorsStreamWriter bad;
  bad.declare("x", SafetensorsDtype::kF32, {1});
  EXPECT_THAT(test::error_of([&] { bad.open(dir / "no/such/dir/x.safetensors"); }),
              HasSubstr("no/such/dir/x.safetensors: cannot create"));
}

// A tensor as the safetensors format gives it to a reader: dtype, shape and values (as double).
struct SpecTensor {
  std::string dtype;
  std::vector<int64_t> shape;
  std::vector<double> values;
};

// Reads `bytes` by the rules of the safetensors format (huggingface/safetensors, tensor.rs:
// read_metadata and Metadata::validate), independently of read_safetensors: an 8-byte
// little-endian header length N; N bytes of a JSON object starting with '{' (trailing spaces
// allowed); "__metadata__" a map of strings to strings; every other key a tensor {dtype, shape,
// data_offsets} whose offsets, sorted, tile the data buffer after the header exactly (no hole, no
// overlap, the last ending at the end of the file), each spanning numel x dtype size. ADD_FAILURE
// for every rule broken.
std::map<std::string, SpecTensor> read_by_the_format_rules(
    const std::string& bytes, std::map<std::string, std::string>* meta) {
  std::map<std::string, SpecTensor> out;
  if (bytes.size() < 8) {
    ADD_FAILURE() << "shorter than the 8-byte header length";
    return out;
  }
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(bytes[static_cast<size_t>(i)]);
  if (n > bytes.size() - 8) {
    ADD_FAILURE() << "header length " << n << " past the end of " << bytes.size() << " bytes";
    return out;
  }
  const std::string header = bytes.substr(8, n);
  EXPECT_EQ(header.front(), '{') << "the header must start with '{'";
  const size_t data_start = 8 + n;
  EXPECT_EQ(data_start % 8, 0u) << "the data buffer starts 8-byte aligned";
  const nlohmann::json h = nlohmann::json::parse(header, nullptr, /*allow_exceptions=*/false);
  if (!h.is_object()) {
    ADD_FAILURE() << "the header is not a JSON object: " << header;
    return out;
  }
  const std::map<std::string, int64_t> sizes{{"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2},
                                             {"I64", 8}, {"I32", 4}, {"I16", 2}, {"I8", 1},
                                             {"U8", 1},  {"BOOL", 1}};
  std::vector<std::tuple<uint64_t, uint64_t, std::string>> spans;
  for (const auto& [name, t] : h.items()) {
    if (name == "__metadata__") {
      EXPECT_TRUE(t.is_object()) << "__metadata__ is a map";
      for (const auto& [k, v] : t.items()) {
        EXPECT_TRUE(v.is_string()) << "__metadata__." << k << " must be a string";
        if (meta && v.is_string()) (*meta)[k] = v.get<std::string>();
      }
      continue;
    }
    if (!t.is_object() || t.size() != 3 || !t.contains("dtype") || !t.contains("shape") ||
        !t.contains("data_offsets")) {
      ADD_FAILURE() << name << ": not {dtype, shape, data_offsets}: " << t.dump();
      continue;
    }
    SpecTensor x;
    x.dtype = t["dtype"].get<std::string>();
    if (!sizes.contains(x.dtype)) {
      ADD_FAILURE() << name << ": dtype " << x.dtype;
      continue;
    }
    int64_t numel = 1;
    for (const auto& d : t["shape"]) {
      x.shape.push_back(d.get<int64_t>());
      numel *= x.shape.back();
    }
    const uint64_t begin = t["data_offsets"].at(0).get<uint64_t>();
    const uint64_t end = t["data_offsets"].at(1).get<uint64_t>();
    const int64_t item = sizes.at(x.dtype);
    EXPECT_EQ(end - begin, static_cast<uint64_t>(numel * item)) << name << ": numel x dtype size";
    EXPECT_EQ(begin % static_cast<uint64_t>(item), 0u) << name << ": aligned to its dtype";
    spans.emplace_back(begin, end, name);
    if (end < begin || data_start + end > bytes.size()) {
      ADD_FAILURE() << name << ": offsets [" << begin << ", " << end << ") out of the file";
      continue;
    }
    // Values only from inside the span (a span shorter than the shape says is reported above).
    const int64_t readable = std::min<int64_t>(numel, static_cast<int64_t>((end - begin)) / item);
    const char* p = bytes.data() + data_start + begin;
    for (int64_t i = 0; i < readable; ++i, p += item) {
      if (x.dtype == "F32") {
        float v;
        std::memcpy(&v, p, 4);
        x.values.push_back(v);
      } else if (x.dtype == "I32") {
        int32_t v;
        std::memcpy(&v, p, 4);
        x.values.push_back(v);
      } else if (x.dtype == "BF16") {  // the upper half of an f32
        uint16_t v;
        std::memcpy(&v, p, 2);
        x.values.push_back(std::bit_cast<float>(static_cast<uint32_t>(v) << 16));
      }
    }
    out[name] = x;
  }
  std::sort(spans.begin(), spans.end());
  uint64_t at = 0;
  for (const auto& [begin, end, name] : spans) {
    EXPECT_EQ(begin, at) << name << ": the tensors must tile the buffer (no hole, no overlap)";
    at = end;
  }
  EXPECT_EQ(data_start + at, bytes.size()) << "the last tensor ends at the end of the file";
  return out;
}

// What PyTorchReadsIt asks of PyTorch, asked of the format's rules: runs everywhere.
TEST(Safetensors, ReadByTheFormatRules) {
  test::TempDir dir;
  example().write(dir / "m.safetensors");
  std::map<std::string, std::string> meta;
  const auto t = read_by_the_format_rules(test::slurp(dir / "m.safetensors"), &meta);
  EXPECT_EQ(meta, (std::map<std::string, std::string>{{"format", "pt"}}));
  ASSERT_EQ(t.size(), 4u);
  EXPECT_EQ(t.at("embedding.weight").dtype, "F32");
  EXPECT_EQ(t.at("embedding.weight").shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(t.at("embedding.weight").values,
            (std::vector<double>{1.5, -2.0, 0.25, 8.0, 0.0, -0.5}));
  EXPECT_EQ(t.at("step").dtype, "I32");
  EXPECT_EQ(t.at("step").shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(t.at("step").values, (std::vector<double>{7, -9}));
  EXPECT_EQ(t.at("norm.bias").dtype, "BF16");
  EXPECT_EQ(t.at("norm.bias").shape, (std::vector<int64_t>{3}));
  EXPECT_EQ(t.at("norm.bias").values, (std::vector<double>{1.0, -2.0, 0.25}));
  EXPECT_EQ(t.at("head.weight").values, (std::vector<double>{3.0, -1.0}));
  // The stream writer's file too (the checkpoint's weights.safetensors is written by it).
  SafetensorsStreamWriter w;
  w.declare("a", SafetensorsDtype::kBF16, {1});
  w.declare("b", SafetensorsDtype::kF32, {2, 1});
  w.open(dir / "s.safetensors");
  const std::vector<uint16_t> a{0x4040};  // bf16 3.0
  const std::vector<float> b{0.5f, -4.0f};
  w.write("b", std::as_bytes(std::span(b)));
  w.write("a", std::as_bytes(std::span(a)));
  w.close();
  const auto s = read_by_the_format_rules(test::slurp(dir / "s.safetensors"), nullptr);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s.at("a").values, (std::vector<double>{3.0}));
  EXPECT_EQ(s.at("b").shape, (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(s.at("b").values, (std::vector<double>{0.5, -4.0}));
}

// The reader above is no reader that accepts anything: a buffer with a hole, a span of the wrong
// length, are each reported (once: the header is otherwise well formed and aligned).
TEST(Safetensors, TheFormatRulesCatchABrokenFile) {
  auto failures_of = [](std::string header, size_t data_bytes) {
    while ((8 + header.size()) % 8 != 0) header += ' ';
    std::string bytes(8, '\0');
    bytes[0] = static_cast<char>(header.size());
    bytes += header + std::string(data_bytes, '\0');
    ::testing::TestPartResultArray results;
    ::testing::ScopedFakeTestPartResultReporter reporter(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &results);
    read_by_the_format_rules(bytes, nullptr);
    return results.size();
  };
  EXPECT_EQ(failures_of(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 8), 0);
  EXPECT_EQ(failures_of(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12), 1);
  EXPECT_EQ(failures_of(R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8), 1);
}

TEST(Safetensors, PyTorchReadsIt) {
  // An optional cross-check: ReadByTheFormatRules checks the same file without python.
  if (std::system("python3 -c 'import torch' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "optional cross-check: python3 with torch not found (Debian: python3-torch); "
                    "Safetensors.ReadByTheFormatRules checked the file without it";
  if (std::system("python3 -c 'import safetensors.torch' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "optional cross-check: python3 has torch but no safetensors package (pip "
                    "install safetensors); Safetensors.ReadByTheFormatRules checked the file "
                    "without it";
  test::TempDir dir;
  example().write(dir / "m.safetensors");
  const std::string cmd =
      "python3 -c \"import sys, torch; from safetensors.torch import load_file; "
      "t = load_file(sys.argv[1]); "
      "assert t['embedding.weight'].tolist() == [[1.5, -2.0, 0.25], [8.0, 0.0, -0.5]]; "
      "assert t['step'].tolist() == [7, -9]; "
      "assert t['norm.bias'].dtype == torch.bfloat16 and t['norm.bias'].tolist() == [1.0, -2.0, "
      "0.25]\" " +
      dir / "m.safetensors";
  EXPECT_EQ(std::system(cmd.c_str()), 0);
}

}  // namespace
}  // namespace mplan::exec
