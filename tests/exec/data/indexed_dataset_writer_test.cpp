// IndexedDatasetWriter: the exact bytes Megatron-LM's IndexedDatasetBuilder writes for a small
// corpus (worked out by hand from indexed_dataset.py's _IndexWriter), an empty document as a
// boundary only, several sequences in one document, ids that do not fit the dtype, and no files
// under the final names unless finalize() ran.
#include "exec/data/indexed_dataset_writer.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/exec/data/data_test_util.hpp"

namespace mplan::exec {
namespace {

using ::testing::StartsWith;

template <class T>
void put(std::string& s, T v) {
  s.append(reinterpret_cast<const char*>(&v), sizeof(T));
}

TEST(IndexedDatasetWriter, BytesAsMegatronWritesThem) {
  test::TempDir dir;
  const std::string prefix = dir / "corpus";
  IndexedDatasetWriter w(prefix, TokenDtype::kUint16);
  const std::vector<int32_t> a{1, 2, 3}, b{4, 5};
  w.add_document(a);
  w.add_document({});  // empty: a boundary, no sequence
  w.add_document(b);
  EXPECT_EQ(w.num_documents(), 3);
  EXPECT_EQ(w.num_tokens(), 5);
  w.finalize();

  std::string idx("MMIDIDX\0\0", 9);
  put(idx, uint64_t{1});  // version
  put(idx, uint8_t{8});   // dtype code of uint16
  put(idx, uint64_t{2});  // sequences
  put(idx, uint64_t{4});  // document indices
  put(idx, int32_t{3});   // lengths
  put(idx, int32_t{2});
  put(idx, int64_t{0});  // pointers (bytes)
  put(idx, int64_t{6});
  for (int64_t d : {0, 1, 1, 2}) put(idx, d);  // document indices
  EXPECT_EQ(test::slurp(prefix + ".idx"), idx);
  std::string bin;
  for (uint16_t t : {1, 2, 3, 4, 5}) put(bin, t);
  EXPECT_EQ(test::slurp(prefix + ".bin"), bin);
  EXPECT_FALSE(std::filesystem::exists(prefix + ".bin.tmp"));
}

TEST(IndexedDatasetWriter, SeveralSequencesInOneDocument) {
  test::TempDir dir;
  IndexedDatasetWriter w(dir / "s", TokenDtype::kInt32);
  const std::vector<int32_t> tokens{7, 8, 9, 70000}, lengths{1, 3};
  w.add_document(tokens, lengths);
  w.finalize();
  IndexedDataset d(dir / "s");
  EXPECT_EQ(d.num_sequences(), 2);
  EXPECT_EQ(d.num_documents(), 1);
  EXPECT_EQ(d.document_index(1), 2);
  std::vector<int32_t> out(3);
  d.read(1, 0, out);
  EXPECT_EQ(out, (std::vector<int32_t>{8, 9, 70000}));
}

TEST(IndexedDatasetWriter, IdsMustFitTheDtype) {
  test::TempDir dir;
  IndexedDatasetWriter w(dir / "u16", TokenDtype::kUint16);
  const std::vector<int32_t> big{65536};
  EXPECT_THAT(test::error_of([&] { w.add_document(big); }),
              StartsWith(dir / "u16" + ".bin: token id 65536 does not fit dtype uint16"));
  EXPECT_THAT(test::error_of([&] { IndexedDatasetWriter f(dir / "f", TokenDtype::kFloat32); }),
              StartsWith(dir / "f" + ".bin: tokens cannot be stored as float32"));
}

TEST(IndexedDatasetWriter, NothingUnderTheFinalNamesWithoutFinalize) {
  test::TempDir dir;
  {
    IndexedDatasetWriter w(dir / "partial", TokenDtype::kUint16);
    const std::vector<int32_t> a{1, 2};
    w.add_document(a);
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

}  // namespace
}  // namespace mplan::exec
