// BlendedDataset: the blending indices equal Megatron-LM's helpers.cpp (the first samples worked
// by hand, the rest as Megatron's build_blending_indices and build_exhaustive_blending_indices
// printed them), samples come from the right dataset, oversampling and bad weights are errors,
// and numpy's pairwise sum for the normalization.
#include "exec/data/blended_dataset.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/exec/data/data_test_util.hpp"

namespace mplan::exec {
namespace {

using ::testing::StartsWith;

// Sample i of source `id` is [id, i, i, ...].
class Counting final : public TokenSource {
 public:
  Counting(int32_t id, int64_t n) : id_(id), n_(n) {}
  int64_t size() const override { return n_; }
  int64_t sample_tokens() const override { return 3; }
  void sample(int64_t index, std::span<int32_t> out) const override {
    out[0] = id_;
    out[1] = out[2] = static_cast<int32_t>(index);
  }

 private:
  int32_t id_;
  int64_t n_;
};

// Weights 0.3, 0.7. Sample i goes to the dataset with the largest w·max(i, 1) - drawn:
//   i=0: 0.3, 0.7 -> B;  i=1: 0.3, 0.7-1 -> A;  i=2: 0.6-1, 1.4-1 -> B;  i=3: 0.9-1, 2.1-2 -> B.
TEST(BlendedDataset, BlendingIndicesAsMegatron) {
  std::vector<int16_t> index;
  std::vector<int64_t> sample;
  build_blending_indices({0.3, 0.7}, 10, index, sample);
  EXPECT_EQ(index, (std::vector<int16_t>{1, 0, 1, 1, 0, 1, 1, 0, 1, 1}));
  EXPECT_EQ(sample, (std::vector<int64_t>{0, 0, 1, 2, 1, 3, 4, 2, 5, 6}));
  build_blending_indices({0.5, 0.25, 0.25}, 7, index, sample);  // ties go to the lowest index
  EXPECT_EQ(index, (std::vector<int16_t>{0, 1, 2, 0, 0, 1, 2}));
  EXPECT_EQ(sample, (std::vector<int64_t>{0, 0, 0, 1, 2, 1, 1}));
}

TEST(BlendedDataset, SamplesComeFromTheirDataset) {
  BlendedDataset b({std::make_shared<Counting>(7, 100), std::make_shared<Counting>(8, 100)},
                   {"A", "B"}, {3, 7}, 10, "train");  // weights normalized to 0.3, 0.7
  EXPECT_DOUBLE_EQ(b.weights()[0], 0.3);
  ASSERT_EQ(b.size(), 10);
  std::vector<int32_t> out(3);
  b.sample(4, out);  // the second sample of A
  EXPECT_EQ(out, (std::vector<int32_t>{7, 1, 1}));
  b.sample(9, out);  // the seventh of B
  EXPECT_EQ(out, (std::vector<int32_t>{8, 6, 6}));
}

// Without a size the weights are sample counts and each is drawn exactly.
TEST(BlendedDataset, ExhaustiveAsMegatron) {
  BlendedDataset b({std::make_shared<Counting>(0, 3), std::make_shared<Counting>(1, 5)}, {"A", "B"},
                   {3, 5}, std::nullopt, "valid");
  ASSERT_EQ(b.size(), 8);
  const std::vector<int> index{1, 0, 1, 0, 1, 1, 0, 1};
  const std::vector<int64_t> sample{0, 0, 1, 1, 2, 3, 2, 4};
  for (int64_t i = 0; i < 8; ++i) {
    EXPECT_EQ(b.dataset_index(i), index[static_cast<size_t>(i)]);
    EXPECT_EQ(b.dataset_sample_index(i), sample[static_cast<size_t>(i)]);
  }
}

TEST(BlendedDataset, Errors) {
  EXPECT_EQ(test::error_of([] {
              BlendedDataset b(
                  {std::make_shared<Counting>(0, 2), std::make_shared<Counting>(1, 50)},
                  {"data/a", "data/b"}, {0.5, 0.5}, 10, "train");
            }),
            "--data-path: the train blend draws 5 samples from data/a, which has only 2");
  EXPECT_THAT(test::error_of([] {
                BlendedDataset b({std::make_shared<Counting>(0, 2)}, {"data/a"}, {0.0}, 1, "test");
              }),
              StartsWith("--data-path: the weight of data/a must be > 0"));
}

TEST(BlendedDataset, NumpySum) {
  // Below 8 values: left to right. 0.1 + 0.2 + 0.3 != 0.1 + (0.2 + 0.3) in doubles.
  EXPECT_EQ(numpy_sum(std::vector<double>{0.1, 0.2, 0.3}), (0.1 + 0.2) + 0.3);
  // 8 to 128 values: eight running sums over whole blocks of 8, combined pairwise, then the rest.
  std::vector<double> v(17);
  for (size_t i = 0; i < v.size(); ++i) v[i] = 0.1 * double(i + 1);
  double r[8];
  for (size_t j = 0; j < 8; ++j) r[j] = v[j] + v[8 + j];
  EXPECT_EQ(numpy_sum(v),
            (((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))) + v[16]);
}

}  // namespace
}  // namespace mplan::exec
