// build_gpt_data_sources: the train, valid and test TokenSources of --data-path and --split, as
// Megatron-LM's BlendedMegatronDatasetBuilder builds them (blended_megatron_dataset_builder.py):
//   one prefix, no weight:   a GptDataset per split over its share of the documents, sized to
//                            the samples the split needs;
//   weighted prefixes:       per prefix and split a GptDataset of ceil(ceil(n·w)·1.005) samples,
//                            blended into sum(ceil(n·w)) samples;
//   several prefixes, no weights: per prefix one epoch of each split, blended by their lengths
//                            into min(n, total) samples.
// A split's documents are [round(start·N), round(end·N)) of each prefix's N documents, where
// (start, end) are the cumulative --split shares (Python's round: half to even).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "exec/data/gpt_dataset.hpp"
#include "exec/data/token_source.hpp"
#include "src/plan/training_config.hpp"

namespace mplan::exec {

// Samples each split must provide (Megatron's get_train_valid_test_num_samples):
// train = train_iters·G, valid = (train_iters / eval_interval + 1)·eval_iters·G (eval_iters·G
// when eval_interval is 0: one evaluation at the end), test = eval_iters·G.
struct DataSplitSizes {
  int64_t train = 0, valid = 0, test = 0;
  int64_t operator[](DataSplit s) const {
    return s == DataSplit::kTrain ? train : s == DataSplit::kValid ? valid : test;
  }
};
DataSplitSizes megatron_split_sizes(int64_t train_iters, int64_t global_batch_size,
                                    int64_t eval_interval, int64_t eval_iters);

// Megatron's split matrix: per split, the [start, end) fraction of the documents, or nothing when
// the split has no share.
std::array<std::optional<std::pair<double, double>>, 3> split_matrix(
    const std::array<double, 3>& shares);
// [round(start·N), round(end·N)) with round half to even (Python's round).
std::pair<int64_t, int64_t> split_documents(const std::pair<double, double>& bookends,
                                            int64_t num_documents);

struct GptDataSources {
  std::shared_ptr<const TokenSource> train, valid, test;    // null: the split has no share
  std::vector<std::shared_ptr<const GptDataset>> datasets;  // every GptDataset built
  std::shared_ptr<const TokenSource> get(DataSplit s) const {
    return s == DataSplit::kTrain ? train : s == DataSplit::kValid ? valid : test;
  }
};

// `config.split` is parsed with parse_split; errors name --data-path, --split or the data file.
GptDataSources build_gpt_data_sources(const DataBlend& blend, const DataSplitSizes& sizes,
                                      const GptDatasetConfig& config);

}  // namespace mplan::exec
