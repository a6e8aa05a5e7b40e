// build_gpt_data_sources: Megatron's builder cases (one prefix; weighted blend; unweighted blend).
#include "exec/data/gpt_data_sources.hpp"

#include <cfenv>
#include <cmath>
#include <map>

#include "exec/data/blended_dataset.hpp"
#include "src/common/error.hpp"

namespace mplan::exec {
namespace {

constexpr double kMidLevelDatasetSurplus = 0.005;
constexpr DataSplit kSplits[3] = {DataSplit::kTrain, DataSplit::kValid, DataSplit::kTest};

}  // namespace

DataSplitSizes megatron_split_sizes(int64_t train_iters, int64_t global_batch_size,
                                    int64_t eval_interval, int64_t eval_iters) {
  DataSplitSizes s;
  s.train = train_iters * global_batch_size;
  const int64_t eval_points = eval_interval > 0 ? train_iters / eval_interval + 1 : 1;
  s.valid = eval_points * eval_iters * global_batch_size;
  s.test = eval_iters * global_batch_size;
  return s;
}

std::array<std::optional<std::pair<double, double>>, 3> split_matrix(
    const std::array<double, 3>& shares) {
  std::array<std::optional<std::pair<double, double>>, 3> m;
  double start = 0;
  for (size_t i = 0; i < 3; ++i) {
    const double end = start + shares[i];
    if (end > start) m[i] = std::pair{start, end};
    start = end;
  }
  return m;
}

std::pair<int64_t, int64_t> split_documents(const std::pair<double, double>& bookends,
                                            int64_t num_documents) {
  const int saved = std::fegetround();
  std::fesetround(FE_TONEAREST);  // nearbyint: half to even, as Python's round()
  const auto n = static_cast<double>(num_documents);
  const auto beg = static_cast<int64_t>(std::nearbyint(bookends.first * n));
  const auto end = static_cast<int64_t>(std::nearbyint(bookends.second * n));
  std::fesetround(saved);
  return {beg, end};
}

GptDataSources build_gpt_data_sources(const DataBlend& blend, const DataSplitSizes& sizes,
                                      const GptDatasetConfig& config) {
  if (blend.empty()) throw Error("--data-path: no data prefix given");
  const auto matrix = split_matrix(parse_split(config.split, "--split"));
  GptDataSources out;
  std::map<std::string, std::shared_ptr<const IndexedDataset>> opened;
  auto indexed = [&](const std::string& prefix) {
    auto& slot = opened[prefix];
    if (!slot) slot = std::make_shared<const IndexedDataset>(prefix);
    return slot;
  };
  // Megatron's _build_megatron_dataset_splits: the GptDatasets of one prefix.
  auto build_splits = [&](const std::string& prefix, const std::array<int64_t, 3>& num_samples) {
    std::array<std::shared_ptr<const GptDataset>, 3> ds;
    auto data = indexed(prefix);
    for (DataSplit s : kSplits) {
      const auto i = static_cast<size_t>(s);
      if (!matrix[i]) continue;
      const auto [beg, end] = split_documents(*matrix[i], data->num_sequences());
      ds[i] = std::make_shared<const GptDataset>(data, beg, end, num_samples[i], s, config);
      out.datasets.push_back(ds[i]);
    }
    return ds;
  };
  auto set = [&](DataSplit s, std::shared_ptr<const TokenSource> source) {
    (s == DataSplit::kTrain   ? out.train
     : s == DataSplit::kValid ? out.valid
                              : out.test) = std::move(source);
  };

  if (blend.prefixes.size() == 1 && blend.weights.empty()) {
    const auto ds = build_splits(blend.prefixes[0], {sizes.train, sizes.valid, sizes.test});
    for (DataSplit s : kSplits) set(s, ds[static_cast<size_t>(s)]);
    return out;
  }

  const size_t n = blend.prefixes.size();
  std::vector<std::array<std::shared_ptr<const GptDataset>, 3>> per_prefix;
  std::vector<double> weights;
  std::vector<std::array<int64_t, 3>> target(n);
  if (!blend.weights.empty()) {
    weights = numpy_normalize(blend.weights);
    for (size_t d = 0; d < n; ++d) {
      std::array<int64_t, 3> buffer{};
      for (DataSplit s : kSplits) {
        const auto i = static_cast<size_t>(s);
        target[d][i] = static_cast<int64_t>(std::ceil(static_cast<double>(sizes[s]) * weights[d]));
        buffer[i] = static_cast<int64_t>(
            std::ceil(static_cast<double>(target[d][i]) * (1 + kMidLevelDatasetSurplus)));
      }
      per_prefix.push_back(build_splits(blend.prefixes[d], buffer));
    }
  } else {
    for (size_t d = 0; d < n; ++d)
      per_prefix.push_back(build_splits(blend.prefixes[d], {-1, -1, -1}));
  }
  for (DataSplit s : kSplits) {
    const auto i = static_cast<size_t>(s);
    if (!matrix[i]) continue;
    std::vector<std::shared_ptr<const TokenSource>> parts;
    std::vector<double> w;
    int64_t size = 0;
    for (size_t d = 0; d < n; ++d) {
      parts.push_back(per_prefix[d][i]);
      if (!blend.weights.empty()) {
        w.push_back(weights[d]);
        size += target[d][i];
      } else {
        const int64_t len = per_prefix[d][i]->size();
        if (len == 0)
          throw Error(cat("--data-path: ", blend.prefixes[d], " has no ", to_string(s),
                          " samples to blend (--split ", config.split, ")"));
        w.push_back(static_cast<double>(len));
        size += len;
      }
    }
    if (blend.weights.empty()) size = std::min(size, sizes[s]);
    set(s, std::make_shared<const BlendedDataset>(std::move(parts), blend.prefixes, std::move(w),
                                                  size, to_string(s)));
  }
  return out;
}

}  // namespace mplan::exec
