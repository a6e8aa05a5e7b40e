// safetensors: a written file parsed back byte for byte (header layout, 8-byte alignment, data
// ordered by dtype size so each tensor is aligned, metadata), damaged files refused naming the
// file, and, when python3 has the `safetensors` package, PyTorch's reader loading it (skipped
// otherwise).
#include "exec/data/safetensors_file.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

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

TEST(Safetensors, PyTorchReadsIt) {
  if (std::system("python3 -c 'import safetensors.torch' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "python3 has no safetensors package";
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
