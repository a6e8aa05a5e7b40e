// MappedFile: maps a file's bytes, an empty file maps to nothing, a missing file or a directory
// is an Error naming the path, and a moved-from map releases nothing twice.
#include "exec/data/mapped_file.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/exec/data/data_test_util.hpp"

namespace mplan::exec {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(MappedFile, MapsTheBytes) {
  test::TempDir dir;
  test::write_file(dir / "f", std::string("\x01\x02\x03\x04\x05\x06\x07\x08\x09", 9));
  MappedFile f(dir / "f");
  ASSERT_EQ(f.size(), 9);
  EXPECT_EQ(f.load<uint8_t>(0), 1);
  EXPECT_EQ(f.load<uint32_t>(1), 0x05040302u);  // little-endian, unaligned
  MappedFile g(std::move(f));
  EXPECT_EQ(g.size(), 9);
  EXPECT_EQ(g.load<uint8_t>(8), 9);
}

TEST(MappedFile, EmptyFile) {
  test::TempDir dir;
  test::write_file(dir / "empty", "");
  MappedFile f(dir / "empty");
  EXPECT_EQ(f.size(), 0);
  EXPECT_TRUE(f.bytes().empty());
}

TEST(MappedFile, ErrorsNameThePath) {
  test::TempDir dir;
  EXPECT_THAT(test::error_of([&] { MappedFile f(dir / "missing"); }),
              StartsWith(dir / "missing" + ": cannot open"));
  EXPECT_THAT(test::error_of([&] { MappedFile f(dir.path().string()); }),
              HasSubstr(": not a regular file"));
}

}  // namespace
}  // namespace mplan::exec
