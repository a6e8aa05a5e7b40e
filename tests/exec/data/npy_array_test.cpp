// NpyArray: .npy files in numpy's format 1.0 (magic, header dict, data aligned to 64 bytes),
// loaded back mapped with every element equal, and malformed files refused naming the file.
#include "exec/data/npy_array.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/exec/data/data_test_util.hpp"

namespace mplan::exec {
namespace {

using ::testing::StartsWith;

TEST(NpyArray, SavesAsNumpyAndLoadsBack) {
  test::TempDir dir;
  NpyArray a(NpyDtype::kI32, {3, 2});
  for (int64_t i = 0; i < 6; ++i) a.set(i, i * 10 - 20);
  a.save(dir / "a.npy");
  const std::string bytes = test::slurp(dir / "a.npy");
  ASSERT_EQ(bytes.size(), 128u + 24u);  // 10 + 59 header bytes + '\n' pad to 128
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  EXPECT_EQ(bytes[8] + 256 * bytes[9], 118);  // header length
  EXPECT_EQ(bytes.substr(10, 59), "{'descr': '<i4', 'fortran_order': False, 'shape': (3, 2), }");
  EXPECT_EQ(bytes.substr(69, 58), std::string(58, ' '));
  EXPECT_EQ(bytes[127], '\n');
  NpyArray b = NpyArray::load(dir / "a.npy");
  EXPECT_EQ(b.dtype(), NpyDtype::kI32);
  EXPECT_EQ(b.shape(), (std::vector<int64_t>{3, 2}));
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(b.at(i), i * 10 - 20);
}

TEST(NpyArray, EveryDtypeAndOneDimension) {
  test::TempDir dir;
  for (NpyDtype dt :
       {NpyDtype::kI16, NpyDtype::kI32, NpyDtype::kI64, NpyDtype::kU16, NpyDtype::kU32}) {
    NpyArray a(dt, {5});
    for (int64_t i = 0; i < 5; ++i) a.set(i, 1000 * i + 7);
    a.save(dir / "v.npy");
    EXPECT_THAT(test::slurp(dir / "v.npy"), ::testing::HasSubstr("'shape': (5,), }"));
    NpyArray b = NpyArray::load(dir / "v.npy");
    EXPECT_EQ(b.dtype(), dt);
    EXPECT_EQ(b.numel(), 5);
    EXPECT_EQ(b.at(4), 4007);
  }
}

TEST(NpyArray, MalformedFilesNameThePath) {
  test::TempDir dir;
  test::write_file(dir / "x.npy", "hello");
  EXPECT_THAT(test::error_of([&] { NpyArray::load(dir / "x.npy"); }),
              StartsWith(dir / "x.npy" + ": not a usable .npy file (no magic)"));
  NpyArray a(NpyDtype::kI64, {4});
  a.save(dir / "t.npy");
  const std::string bytes = test::slurp(dir / "t.npy");
  test::write_file(dir / "t.npy", bytes.substr(0, bytes.size() - 8));
  EXPECT_THAT(test::error_of([&] { NpyArray::load(dir / "t.npy"); }),
              StartsWith(dir / "t.npy" + ": not a usable .npy file (24 data bytes for 4"));
}

}  // namespace
}  // namespace mplan::exec
