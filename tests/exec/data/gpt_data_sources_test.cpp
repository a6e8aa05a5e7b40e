// build_gpt_data_sources: Megatron's split rule (cumulative shares, Python's round half to even),
// the samples each split needs, and the three builder cases: one prefix, weighted prefixes
// (1.005 surplus per dataset, sum of ceil(n·w) blended), unweighted prefixes (one epoch each,
// blended by length). Errors name --split or --data-path.
#include "exec/data/gpt_data_sources.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "exec/data/indexed_dataset_writer.hpp"
#include "tests/exec/data/data_test_util.hpp"

namespace mplan::exec {
namespace {

using ::testing::StartsWith;

// `docs` documents of `length` tokens; token = 1000·tag + document.
std::string corpus(const test::TempDir& dir, const std::string& name, int docs, int length,
                   int tag) {
  IndexedDatasetWriter w(dir / name, TokenDtype::kInt32);
  for (int d = 0; d < docs; ++d)
    w.add_document(std::vector<int32_t>(size_t(length), 1000 * tag + d));
  w.finalize();
  return dir / name;
}

GptDatasetConfig config(const std::string& split, int64_t seq = 7) {
  GptDatasetConfig c;
  c.seq_length = seq;
  c.seed = 1234;
  c.split = split;
  c.no_cache = true;
  return c;
}

TEST(GptDataSources, SplitSizesAsMegatron) {
  // train_iters 1000, G 16, eval every 100 for 10: valid (1000/100 + 1)·10·16, test 10·16.
  const DataSplitSizes s = megatron_split_sizes(1000, 16, 100, 10);
  EXPECT_EQ(s.train, 16000);
  EXPECT_EQ(s.valid, 1760);
  EXPECT_EQ(s.test, 160);
  EXPECT_EQ(megatron_split_sizes(10, 4, 0, 3).valid,
            12);  // no periodic evaluation: one, at the end
}

TEST(GptDataSources, SplitRule) {
  // "949,50,1" of 1000 documents: [0, 949), [949, 999), [999, 1000).
  const auto m = split_matrix(parse_split("949,50,1", "--split"));
  EXPECT_EQ(split_documents(*m[0], 1000), (std::pair<int64_t, int64_t>{0, 949}));
  EXPECT_EQ(split_documents(*m[1], 1000), (std::pair<int64_t, int64_t>{949, 999}));
  EXPECT_EQ(split_documents(*m[2], 1000), (std::pair<int64_t, int64_t>{999, 1000}));
  // Half way through 5 documents: 2.5 rounds to 2 (half to even), as Python's round().
  const auto half = split_matrix(parse_split("1,1", "--split"));
  EXPECT_EQ(split_documents(*half[0], 5), (std::pair<int64_t, int64_t>{0, 2}));
  EXPECT_EQ(split_documents(*half[1], 5), (std::pair<int64_t, int64_t>{2, 5}));
  EXPECT_FALSE(half[2].has_value());  // no share: no dataset
}

TEST(GptDataSources, OnePrefix) {
  test::TempDir dir;
  const std::string a = corpus(dir, "a", 20, 8, 1);
  const GptDataSources s = build_gpt_data_sources({{a}, {}}, {30, 4, 0}, config("80,20,0"));
  ASSERT_TRUE(s.train && s.valid);
  EXPECT_FALSE(s.test);
  EXPECT_GE(s.train->size(), 30);
  EXPECT_GE(s.valid->size(), 4);
  std::vector<int32_t> out(8);
  for (int64_t i = 0; i < s.valid->size(); ++i) {
    s.valid->sample(i, out);
    for (int32_t t : out) EXPECT_TRUE(t >= 1016 && t < 1020) << t;  // documents 16..19
  }
}

TEST(GptDataSources, WeightedBlend) {
  test::TempDir dir;
  const std::string a = corpus(dir, "a", 40, 8, 1), b = corpus(dir, "b", 40, 8, 2);
  const GptDataSources s =
      build_gpt_data_sources({{a, b}, {0.3, 0.7}}, {100, 10, 10}, config("90,5,5"));
  // ceil(100·0.3) + ceil(100·0.7) = 30 + 70 samples, drawn 3 : 7.
  ASSERT_EQ(s.train->size(), 100);
  int from_a = 0;
  std::vector<int32_t> out(8);
  for (int64_t i = 0; i < 100; ++i) {
    s.train->sample(i, out);
    from_a += out[0] < 2000 ? 1 : 0;
  }
  EXPECT_EQ(from_a, 30);
  // Each GptDataset was asked for ceil(ceil(n·w)·1.005) samples.
  EXPECT_EQ(s.datasets[0]->num_samples_requested(), 31);  // a, train: ceil(30·1.005)
  EXPECT_EQ(s.datasets[3]->num_samples_requested(), 71);  // b, train: ceil(70·1.005)
}

TEST(GptDataSources, UnweightedBlendByLength) {
  test::TempDir dir;
  const std::string a = corpus(dir, "a", 10, 8, 1), b = corpus(dir, "b", 30, 8, 2);
  const GptDataSources s = build_gpt_data_sources({{a, b}, {}}, {1000, 0, 0}, config("1"));
  // One epoch each: (10·8 - 1)/7 = 11 and (30·8 - 1)/7 = 34 samples; min(1000, 45).
  EXPECT_EQ(s.train->size(), 45);
}

TEST(GptDataSources, Errors) {
  test::TempDir dir;
  const std::string a = corpus(dir, "a", 3, 8, 1);
  EXPECT_THAT(test::error_of([&] {
                build_gpt_data_sources({{a}, {}}, {1, 1, 1}, config("1,x,2,3,4"));
              }),
              StartsWith("--split: \"1,x,2,3,4\" has 4 numbers; at most three"));
  EXPECT_THAT(test::error_of([&] {
                build_gpt_data_sources({{dir / "none"}, {}}, {1, 1, 1}, config("1"));
              }),
              StartsWith(dir / "none" + ".idx: cannot open"));
  // One document for validation: 8 tokens < one sample of 8 + 1... with seq 8.
  EXPECT_THAT(test::error_of([&] {
                build_gpt_data_sources({{a}, {}}, {1, 1, 0}, config("2,1", 8));
              }),
              StartsWith(a + ": the valid split (documents [2, 3) of 3"));
}

}  // namespace
}  // namespace mplan::exec
