// BlendedDataset: Megatron-LM's BlendedDataset (megatron/core/datasets/blended_dataset.py):
// sample i comes from dataset dataset_index(i), as its dataset_sample_index(i)-th sample. With a
// size, the indices follow helpers.cpp build_blending_indices (each sample goes to the dataset
// whose share lags its weight most; ties to the lowest index); without one, weights are integer
// sample counts and build_exhaustive_blending_indices draws exactly that many from each.
// Invariant: every (dataset, sample) pair is in range (checked at construction: a blend that
// oversamples a dataset is an Error, as in Megatron).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "exec/data/token_source.hpp"

namespace mplan::exec {

class BlendedDataset final : public TokenSource {
 public:
  // `names` label the datasets in errors (their data prefixes). `weights` > 0; normalized when a
  // size is given.
  BlendedDataset(std::vector<std::shared_ptr<const TokenSource>> datasets,
                 std::vector<std::string> names, std::vector<double> weights,
                 std::optional<int64_t> size, const std::string& split_name);

  int64_t size() const override { return static_cast<int64_t>(dataset_index_.size()); }
  int64_t sample_tokens() const override { return datasets_.front()->sample_tokens(); }
  void sample(int64_t index, std::span<int32_t> out) const override;

  int dataset_index(int64_t i) const { return dataset_index_[static_cast<size_t>(i)]; }
  int64_t dataset_sample_index(int64_t i) const {
    return dataset_sample_index_[static_cast<size_t>(i)];
  }
  const std::vector<double>& weights() const { return weights_; }

 private:
  std::vector<std::shared_ptr<const TokenSource>> datasets_;
  std::vector<double> weights_;
  std::vector<int16_t> dataset_index_;
  std::vector<int64_t> dataset_sample_index_;
};

// numpy.sum of a float64 vector (pairwise, blocks of 8) and Megatron's normalize(): w / sum(w).
double numpy_sum(std::span<const double> a);
std::vector<double> numpy_normalize(const std::vector<double>& weights);

// Megatron's build_blending_indices: `size` samples following normalized `weights`.
void build_blending_indices(const std::vector<double>& weights, int64_t size,
                            std::vector<int16_t>& dataset_index,
                            std::vector<int64_t>& dataset_sample_index);

}  // namespace mplan::exec
