// GptDataset: Megatron-LM's GPTDataset (megatron/core/datasets/gpt_dataset.py) over a range of
// documents of one IndexedDataset. Samples of seq_length + 1 tokens run across document
// boundaries; three indices decide which tokens sample i holds, built from the seed and the
// number of samples needed exactly as Megatron builds them:
//   document index: the documents repeated once per epoch and shuffled (numpy RandomState(seed));
//                   when the last epoch is used for less than 80 % of its samples it is shuffled
//                   separately, after the others;
//   sample index:   (position in the document index, token offset) where each sample starts
//                   (helpers.cpp build_sample_idx; consecutive samples share one token);
//   shuffle index:  a permutation of the samples (the last epoch's samples again separately).
// The indices are cached beside the data as Megatron does (<prefix>/cache/GPTDataset_indices/
// <md5 of the description>-GPTDataset-<split>-*.npy) and rebuilt when the description differs.
// Invariant: sample(i) is a pure function of (files, documents, seed, seq_length, num_samples, i).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "exec/data/indexed_dataset.hpp"
#include "exec/data/npy_array.hpp"
#include "exec/data/token_source.hpp"

namespace mplan::exec {

enum class DataSplit { kTrain = 0, kValid = 1, kTest = 2 };
const char* to_string(DataSplit s);  // "train", "valid", "test" (Megatron's Split names)

struct GptDatasetConfig {
  int64_t seq_length = 0;  // --seq-length
  uint32_t seed = 1234;    // --seed (Megatron's random_seed)
  std::string split;       // --split, as given (part of the cache description)
  // Where index files are cached: "" = Megatron's default <prefix>/cache/GPTDataset_indices
  // (--data-cache-path otherwise); no_cache = build in memory every time.
  std::string cache_path;
  bool no_cache = false;
};

// Whether the indices came from the cache.
enum class IndexCacheStatus { kBuilt, kLoaded, kNotCached };

class GptDataset final : public TokenSource {
 public:
  // Documents [first_document, end_document) of `dataset` (Megatron's indexed_indices; a
  // document here is one sequence of the .idx, as `mplan preprocess` writes them), at least
  // `num_samples` samples (-1: one epoch, Megatron's num_samples=None). Throws Error, naming the
  // data prefix and the split, when the documents hold fewer tokens than one sample and samples
  // are asked for, or when the cache cannot be written.
  GptDataset(std::shared_ptr<const IndexedDataset> dataset, int64_t first_document,
             int64_t end_document, int64_t num_samples, DataSplit split,
             const GptDatasetConfig& config);

  int64_t size() const override { return num_built_samples_; }
  int64_t sample_tokens() const override { return config_.seq_length + 1; }
  void sample(int64_t index, std::span<int32_t> out) const override;

  DataSplit split() const { return split_; }
  const IndexedDataset& indexed() const { return *dataset_; }
  int64_t num_epochs() const { return num_epochs_; }
  int64_t num_samples_requested() const { return num_samples_; }
  IndexCacheStatus cache_status() const { return cache_status_; }
  // The cache files' common prefix ("" when not cached), and the description hashed into it.
  const std::string& cache_prefix() const { return cache_prefix_; }
  const std::string& description() const { return description_; }

  // The three indices, for tests and inspection.
  int64_t document_index(int64_t i) const { return document_index_.at(i); }
  int64_t document_index_size() const { return document_index_.numel(); }
  int64_t sample_index_document(int64_t i) const { return sample_index_.at(2 * i); }
  int64_t sample_index_offset(int64_t i) const { return sample_index_.at(2 * i + 1); }
  int64_t shuffle_index(int64_t i) const { return shuffle_index_.at(i); }

 private:
  std::shared_ptr<const IndexedDataset> dataset_;
  int64_t first_document_, end_document_, num_samples_;
  DataSplit split_;
  GptDatasetConfig config_;
  int64_t num_epochs_ = 1, num_built_samples_ = 0;
  NpyArray document_index_, sample_index_, shuffle_index_;
  IndexCacheStatus cache_status_ = IndexCacheStatus::kNotCached;
  std::string cache_prefix_, description_;

  void build_indices(int64_t tokens_per_epoch);
  bool load_cached();
  void save_cache() const;
};

}  // namespace mplan::exec
