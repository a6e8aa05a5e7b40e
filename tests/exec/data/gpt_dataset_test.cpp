// GptDataset: the indices of a small corpus equal Megatron-LM's, worked out by hand below from
// gpt_dataset.py and helpers.cpp build_sample_idx; samples that cross document boundaries; the
// epoch logic with the separately shuffled last epoch (indices as Megatron-LM's own
// _build_document_index, helpers.cpp build_sample_idx and _build_shuffle_index printed them, run
// at commit d98e8a6 with numpy 1.24); the index cache (written, reused, rebuilt
// when the data or the request changes or a file is damaged); too little data for one sample.
#include "exec/data/gpt_dataset.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <numeric>
#include <set>

#include "exec/data/indexed_dataset_writer.hpp"
#include "tests/exec/data/data_test_util.hpp"

namespace mplan::exec {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// Document d of length lengths[d] holds tokens 100·d + p, p = 0, 1, ...
std::shared_ptr<const IndexedDataset> corpus(const test::TempDir& dir,
                                             const std::vector<int32_t>& lengths,
                                             const std::string& name = "c") {
  IndexedDatasetWriter w(dir / name, TokenDtype::kUint16);
  for (size_t d = 0; d < lengths.size(); ++d) {
    std::vector<int32_t> doc(static_cast<size_t>(lengths[d]));
    for (int32_t p = 0; p < lengths[d]; ++p) doc[static_cast<size_t>(p)] = 100 * int32_t(d) + p;
    w.add_document(doc);
  }
  w.finalize();
  return std::make_shared<const IndexedDataset>(dir / name);
}

GptDatasetConfig config(int64_t seq, uint32_t seed, bool cache = false) {
  GptDatasetConfig c;
  c.seq_length = seq;
  c.seed = seed;
  c.split = "1";
  c.no_cache = !cache;
  return c;
}

std::vector<int32_t> sample(const GptDataset& ds, int64_t i) {
  std::vector<int32_t> out(static_cast<size_t>(ds.sample_tokens()));
  ds.sample(i, out);
  return out;
}

// Documents of 5, 3 and 4 tokens, seq_length 4 (samples of 5 tokens), seed 7, one epoch.
// numpy.random.RandomState(7) shuffles the document index [0, 1, 2] to [2, 1, 0], then the
// shuffle index [0, 1] to [1, 0] (numpy 1.24). Tokens per epoch 12: (12 - 1) / 4 = 2 samples.
// build_sample_idx, each sample taking 5 tokens and starting on the last token of the previous:
//   row 0: (0, 0)
//   sample 0: doc 2 (4 tokens, 1 left to take) + doc 1 token 0           -> row 1: (1, 0)
//   sample 1: doc 1 from 0 (3 tokens, 2 left) + doc 0 tokens 0..1         -> row 2: (2, 1)
// so shuffled sample 0 = row 1..2 = doc 1 [0, 3) + doc 0 [0, 2) and sample 1 = doc 2 + doc 1 [0].
TEST(GptDataset, SampleIndexOfASmallCorpusAsMegatron) {
  test::TempDir dir;
  GptDataset ds(corpus(dir, {5, 3, 4}), 0, 3, -1, DataSplit::kTrain, config(4, 7));
  EXPECT_EQ(ds.num_epochs(), 1);
  ASSERT_EQ(ds.document_index_size(), 3);
  EXPECT_EQ(ds.document_index(0), 2);
  EXPECT_EQ(ds.document_index(1), 1);
  EXPECT_EQ(ds.document_index(2), 0);
  ASSERT_EQ(ds.size(), 2);
  EXPECT_EQ(ds.sample_index_document(0), 0);
  EXPECT_EQ(ds.sample_index_offset(0), 0);
  EXPECT_EQ(ds.sample_index_document(1), 1);
  EXPECT_EQ(ds.sample_index_offset(1), 0);
  EXPECT_EQ(ds.sample_index_document(2), 2);
  EXPECT_EQ(ds.sample_index_offset(2), 1);
  EXPECT_EQ(ds.shuffle_index(0), 1);
  EXPECT_EQ(ds.shuffle_index(1), 0);
  EXPECT_EQ(sample(ds, 0), (std::vector<int32_t>{100, 101, 102, 0, 1}));
  EXPECT_EQ(sample(ds, 1), (std::vector<int32_t>{200, 201, 202, 203, 100}));
}

// A range of documents (a split) only ever reads those documents.
TEST(GptDataset, DocumentRange) {
  test::TempDir dir;
  GptDataset ds(corpus(dir, {5, 3, 4, 6, 2}), 1, 4, -1, DataSplit::kValid, config(3, 1234));
  EXPECT_EQ(ds.size(), (3 + 4 + 6 - 1) / 3);
  for (int64_t i = 0; i < ds.document_index_size(); ++i) {
    EXPECT_GE(ds.document_index(i), 1);
    EXPECT_LT(ds.document_index(i), 4);
  }
  for (int64_t i = 0; i < ds.size(); ++i)
    for (int32_t t : sample(ds, i)) EXPECT_TRUE(t >= 100 && t < 400) << t;
}

// Epochs: 27 tokens per epoch, seq_length 4: one epoch gives (27 - 1) / 4 = 6 samples. Asking
// for 7 needs 7·4 + 1 = 29 tokens, so 2 epochs; the last one supplies 7 - 6 = 1 sample, fewer
// than int(0.8 · 6) = 4, so it is shuffled separately: document index [perm of 0..5, perm of
// 0..5], shuffle index [perm of 0..5, perm of 6..12] over (54 - 1) / 4 = 13 samples.
void expect_indices(const GptDataset& ds, const std::vector<int64_t>& doc,
                    const std::vector<std::pair<int64_t, int64_t>>& samples,
                    const std::vector<int64_t>& shuffle) {
  ASSERT_EQ(ds.document_index_size(), static_cast<int64_t>(doc.size()));
  for (size_t i = 0; i < doc.size(); ++i) EXPECT_EQ(ds.document_index(int64_t(i)), doc[i]) << i;
  ASSERT_EQ(ds.size() + 1, static_cast<int64_t>(samples.size()));
  for (size_t i = 0; i < samples.size(); ++i) {
    EXPECT_EQ(ds.sample_index_document(int64_t(i)), samples[i].first) << i;
    EXPECT_EQ(ds.sample_index_offset(int64_t(i)), samples[i].second) << i;
  }
  for (size_t i = 0; i < shuffle.size(); ++i) EXPECT_EQ(ds.shuffle_index(int64_t(i)), shuffle[i]);
}

TEST(GptDataset, SeparateLastEpoch) {
  test::TempDir dir;
  GptDataset ds(corpus(dir, {5, 3, 4, 6, 2, 7}), 0, 6, 7, DataSplit::kTrain, config(4, 1234));
  EXPECT_EQ(ds.num_epochs(), 2);
  expect_indices(ds, {2, 1, 5, 0, 4, 3, 0, 4, 3, 2, 5, 1},
                 {{0, 0},
                  {1, 0},
                  {2, 1},
                  {2, 5},
                  {3, 2},
                  {4, 1},
                  {5, 3},
                  {6, 1},
                  {7, 0},
                  {8, 2},
                  {9, 0},
                  {10, 0},
                  {10, 4},
                  {11, 1}},
                 {1, 0, 3, 2, 5, 4, 8, 9, 11, 7, 10, 12, 6});
  ASSERT_EQ(ds.document_index_size(), 12);
  ASSERT_EQ(ds.size(), 13);
  for (int half = 0; half < 2; ++half) {
    std::set<int64_t> docs;
    for (int i = 0; i < 6; ++i) docs.insert(ds.document_index(6 * half + i));
    EXPECT_EQ(docs.size(), 6u);
  }
  std::set<int64_t> first, last;
  for (int64_t i = 0; i < 6; ++i) first.insert(ds.shuffle_index(i));
  for (int64_t i = 6; i < 13; ++i) last.insert(ds.shuffle_index(i));
  EXPECT_EQ(*first.rbegin(), 5);
  EXPECT_EQ(first.size(), 6u);
  EXPECT_EQ(*last.begin(), 6);
  EXPECT_EQ(last.size(), 7u);
  // Every sample is 5 consecutive tokens of the epoch's document stream.
  for (int64_t i = 0; i < ds.size(); ++i) EXPECT_EQ(sample(ds, i).size(), 5u);
}

// Asking for 11 of the 13 samples two epochs hold: the last epoch supplies 5 >= 4, so one
// document shuffle and one sample shuffle cover both epochs.
TEST(GptDataset, LastEpochJoinsWhenMostlyUsed) {
  test::TempDir dir;
  auto data = corpus(dir, {5, 3, 4, 6, 2, 7});
  GptDataset ds(data, 0, 6, 11, DataSplit::kTrain, config(4, 1234));
  EXPECT_EQ(ds.num_epochs(), 2);
  expect_indices(ds, {1, 2, 5, 2, 3, 4, 1, 0, 4, 5, 0, 3},
                 {{0, 0},
                  {1, 1},
                  {2, 1},
                  {2, 5},
                  {3, 2},
                  {4, 2},
                  {5, 0},
                  {6, 2},
                  {7, 3},
                  {9, 0},
                  {9, 4},
                  {10, 1},
                  {11, 0},
                  {11, 4}},
                 {7, 11, 2, 3, 1, 9, 5, 4, 0, 8, 6, 10, 12});
  bool mixed = false;
  for (int64_t i = 0; i < 6; ++i) mixed = mixed || ds.shuffle_index(i) >= 6;
  EXPECT_TRUE(mixed);
}

TEST(GptDataset, TooLittleDataForOneSample) {
  test::TempDir dir;
  auto data = corpus(dir, {2, 2});
  EXPECT_THAT(
      test::error_of([&] { GptDataset ds(data, 0, 2, 1, DataSplit::kValid, config(4, 1)); }),
      StartsWith(dir / "c" + ": the valid split (documents [0, 2) of 2, --split 1) holds "
                             "4 tokens, fewer than one sample of seq_length + 1 = 5"));
  GptDataset none(data, 1, 1, 0, DataSplit::kTest, config(4, 1));  // nothing asked: empty
  EXPECT_EQ(none.size(), 0);
}

TEST(GptDataset, IndicesCachedBesideTheDataAsMegatron) {
  test::TempDir dir;
  auto data = corpus(dir, {5, 3, 4, 6, 2, 7});
  GptDataset built(data, 0, 6, 7, DataSplit::kTrain, config(4, 1234, true));
  EXPECT_EQ(built.cache_status(), IndexCacheStatus::kBuilt);
  EXPECT_THAT(built.cache_prefix(), StartsWith(dir / "c" + "/cache/GPTDataset_indices/"));
  EXPECT_THAT(built.cache_prefix(), HasSubstr("-GPTDataset-train-"));
  for (const char* f :
       {"description.txt", "document_index.npy", "sample_index.npy", "shuffle_index.npy"})
    EXPECT_TRUE(std::filesystem::exists(built.cache_prefix() + f)) << f;
  EXPECT_EQ(test::slurp(built.cache_prefix() + "description.txt"), built.description());

  GptDataset loaded(data, 0, 6, 7, DataSplit::kTrain, config(4, 1234, true));
  EXPECT_EQ(loaded.cache_status(), IndexCacheStatus::kLoaded);
  ASSERT_EQ(loaded.size(), built.size());
  for (int64_t i = 0; i < built.size(); ++i) EXPECT_EQ(sample(loaded, i), sample(built, i));

  // Another request (seed) is another cache entry.
  GptDataset other(data, 0, 6, 7, DataSplit::kTrain, config(4, 99, true));
  EXPECT_EQ(other.cache_status(), IndexCacheStatus::kBuilt);
  EXPECT_NE(other.cache_prefix(), built.cache_prefix());

  // A damaged index file: rebuilt under the same name, same samples.
  test::write_file(built.cache_prefix() + "sample_index.npy", "garbage");
  GptDataset repaired(data, 0, 6, 7, DataSplit::kTrain, config(4, 1234, true));
  EXPECT_EQ(repaired.cache_status(), IndexCacheStatus::kBuilt);
  for (int64_t i = 0; i < built.size(); ++i) EXPECT_EQ(sample(repaired, i), sample(built, i));
}

TEST(GptDataset, CacheIsStaleWhenTheDataChanges) {
  test::TempDir dir;
  auto first = corpus(dir, {5, 3, 4}, "d");
  GptDataset a(first, 0, 3, -1, DataSplit::kTrain, config(4, 7, true));
  auto second = corpus(dir, {5, 3, 4, 1}, "d");  // preprocessed again, one more document
  GptDataset b(second, 0, 3, -1, DataSplit::kTrain, config(4, 7, true));
  EXPECT_EQ(b.cache_status(), IndexCacheStatus::kBuilt);
  EXPECT_NE(a.cache_prefix(), b.cache_prefix());
}

TEST(GptDataset, UnwritableCacheIsAnError) {
  test::TempDir dir;
  auto data = corpus(dir, {5, 3, 4});
  test::write_file(dir / "blocker", "a file where the cache directory should go");
  GptDatasetConfig c = config(4, 7, true);
  c.cache_path = dir / "blocker/sub";
  EXPECT_THAT(test::error_of([&] { GptDataset ds(data, 0, 3, -1, DataSplit::kTrain, c); }),
              HasSubstr("cannot create the dataset index cache"));
}

}  // namespace
}  // namespace mplan::exec
