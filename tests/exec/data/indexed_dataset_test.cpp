// IndexedDataset: reads what the writer wrote (every integer dtype), and refuses, with an error
// that names the file, a missing file, a foreign file, a wrong version or dtype, a truncated or
// corrupt .idx and a .bin that is truncated or belongs to another index.
#include "exec/data/indexed_dataset.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "exec/data/indexed_dataset_writer.hpp"
#include "tests/exec/data/data_test_util.hpp"

namespace mplan::exec {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// Documents [[0..4], [10, 11, 12], [20..23]].
std::string write_corpus(const test::TempDir& dir, TokenDtype dtype = TokenDtype::kUint16) {
  const std::string prefix = dir / "c";
  IndexedDatasetWriter w(prefix, dtype);
  w.add_document(std::vector<int32_t>{0, 1, 2, 3, 4});
  w.add_document(std::vector<int32_t>{10, 11, 12});
  w.add_document(std::vector<int32_t>{20, 21, 22, 23});
  w.finalize();
  return prefix;
}

TEST(IndexedDataset, ReadsWhatTheWriterWrote) {
  for (TokenDtype dt : {TokenDtype::kUint8, TokenDtype::kInt8, TokenDtype::kInt16,
                        TokenDtype::kUint16, TokenDtype::kInt32, TokenDtype::kInt64}) {
    test::TempDir dir;
    IndexedDataset d(write_corpus(dir, dt));
    EXPECT_EQ(d.dtype(), dt);
    EXPECT_EQ(d.num_sequences(), 3);
    EXPECT_EQ(d.num_documents(), 3);
    EXPECT_EQ(d.num_tokens(), 12);
    EXPECT_EQ(d.sequence_length(1), 3);
    EXPECT_EQ(d.sequence_pointer(2), 8 * dtype_bytes(dt));
    EXPECT_EQ(d.document_index(3), 3);
    std::vector<int32_t> out(3);
    d.read(2, 1, out);  // Megatron's get(2, offset=1, length=3)
    EXPECT_EQ(out, (std::vector<int32_t>{21, 22, 23})) << to_string(dt);
  }
}

TEST(IndexedDataset, TokenIdRange) {
  for (TokenDtype dt : {TokenDtype::kUint8, TokenDtype::kInt8, TokenDtype::kInt16,
                        TokenDtype::kUint16, TokenDtype::kInt32, TokenDtype::kInt64}) {
    test::TempDir dir;
    EXPECT_EQ(IndexedDataset(write_corpus(dir, dt)).token_id_range(),
              (std::pair<int64_t, int64_t>{0, 23}))
        << to_string(dt);
  }
  test::TempDir dir;
  {
    IndexedDatasetWriter w(dir / "n", TokenDtype::kInt32);
    w.add_document(std::vector<int32_t>{5, 70000, -3, 9});
    w.finalize();
  }
  EXPECT_EQ(IndexedDataset(dir / "n").token_id_range(), (std::pair<int64_t, int64_t>{-3, 70000}));
}

TEST(IndexedDataset, OptimalDtypeAsMegatron) {
  EXPECT_EQ(optimal_token_dtype(50257), TokenDtype::kUint16);  // GPT-2
  EXPECT_EQ(optimal_token_dtype(65499), TokenDtype::kUint16);
  EXPECT_EQ(optimal_token_dtype(65500), TokenDtype::kInt32);
}

class IndexedDatasetBadFiles : public ::testing::Test {
 protected:
  test::TempDir dir;
  std::string prefix = write_corpus(dir);
  std::string idx = test::slurp(prefix + ".idx"), bin = test::slurp(prefix + ".bin");
  std::string open_error() {
    return test::error_of([&] { IndexedDataset d(prefix); });
  }
};

TEST_F(IndexedDatasetBadFiles, Missing) {
  std::filesystem::remove(prefix + ".bin");
  EXPECT_THAT(open_error(), StartsWith(prefix + ".bin: cannot open"));
  std::filesystem::remove(prefix + ".idx");
  EXPECT_THAT(open_error(), StartsWith(prefix + ".idx: cannot open"));
}

TEST_F(IndexedDatasetBadFiles, ForeignFile) {
  test::write_file(prefix + ".idx", "{\"not\": \"an index\"}\n and some more bytes to be long");
  EXPECT_EQ(open_error(),
            prefix + ".idx: not a Megatron indexed dataset index (no MMIDIDX header)");
  test::write_file(prefix + ".idx", "MMID");
  EXPECT_THAT(open_error(), StartsWith(prefix + ".idx: not a Megatron"));
}

TEST_F(IndexedDatasetBadFiles, VersionAndDtype) {
  std::string v = idx;
  v[9] = 2;
  test::write_file(prefix + ".idx", v);
  EXPECT_EQ(open_error(), prefix + ".idx: index version 2, only version 1 can be read");
  std::string d = idx;
  d[17] = 9;
  test::write_file(prefix + ".idx", d);
  EXPECT_EQ(open_error(), prefix + ".idx: unknown dtype code 9");
  d[17] = 6;
  test::write_file(prefix + ".idx", d);
  EXPECT_EQ(open_error(), prefix + ".idx: tokens of dtype float64 are not token ids");
}

TEST_F(IndexedDatasetBadFiles, TruncatedIndex) {
  test::write_file(prefix + ".idx", idx.substr(0, idx.size() - 8));
  EXPECT_THAT(open_error(), StartsWith(prefix + ".idx: truncated"));
  test::write_file(prefix + ".idx", idx.substr(0, 20));
  EXPECT_THAT(open_error(), StartsWith(prefix + ".idx: not a Megatron"));
}

TEST_F(IndexedDatasetBadFiles, CorruptIndex) {
  std::string huge = idx;
  huge[18 + 7] = 0x7f;  // sequence count ~ 2^63
  test::write_file(prefix + ".idx", huge);
  EXPECT_THAT(open_error(), StartsWith(prefix + ".idx: truncated"));
  std::string extra = idx + std::string(5, '\0');
  test::write_file(prefix + ".idx", extra);
  EXPECT_THAT(open_error(), HasSubstr("(corrupt or truncated)"));
  std::string pointer = idx;
  pointer[34 + 12 + 8] = 7;  // second pointer 10 -> 7
  test::write_file(prefix + ".idx", pointer);
  EXPECT_THAT(open_error(), StartsWith(prefix + ".idx: sequence 1 starts at byte 7, expected 10"));
  std::string docs = idx;
  docs[34 + 36 + 8] = 5;  // document index 1 -> 5, past the sequence count
  test::write_file(prefix + ".idx", docs);
  EXPECT_THAT(open_error(), StartsWith(prefix + ".idx: document index 2 goes backwards"));
}

TEST_F(IndexedDatasetBadFiles, TruncatedOrForeignBin) {
  test::write_file(prefix + ".bin", bin.substr(0, bin.size() - 2));
  EXPECT_EQ(open_error(), prefix + ".bin: 22 bytes, but its index " + prefix +
                              ".idx describes 12 tokens of uint16 = 24 bytes (truncated)");
  test::write_file(prefix + ".bin", bin + bin);
  EXPECT_THAT(open_error(), HasSubstr("= 24 bytes (not its data)"));
}

}  // namespace
}  // namespace mplan::exec
