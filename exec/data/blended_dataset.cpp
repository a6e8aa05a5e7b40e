// BlendedDataset: the blending indices and the oversampling check.
#include "exec/data/blended_dataset.hpp"

#include <algorithm>
#include <numeric>
#include <set>

#include "src/common/error.hpp"

namespace mplan::exec {

double numpy_sum(std::span<const double> a) {
  const size_t n = a.size();
  if (n < 8) {
    double res = 0.;
    for (double v : a) res += v;
    return res;
  }
  if (n <= 128) {
    double r[8];
    for (size_t j = 0; j < 8; ++j) r[j] = a[j];
    size_t i = 8;
    for (; i < n - n % 8; i += 8)
      for (size_t j = 0; j < 8; ++j) r[j] += a[i + j];
    double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) res += a[i];
    return res;
  }
  size_t n2 = n / 2;
  n2 -= n2 % 8;
  return numpy_sum(a.first(n2)) + numpy_sum(a.subspan(n2));
}

std::vector<double> numpy_normalize(const std::vector<double>& weights) {
  const double sum = numpy_sum(weights);
  std::vector<double> out(weights);
  for (double& w : out) w /= sum;
  return out;
}

void build_blending_indices(const std::vector<double>& weights, int64_t size,
                            std::vector<int16_t>& dataset_index,
                            std::vector<int64_t>& dataset_sample_index) {
  const size_t n = weights.size();
  dataset_index.assign(static_cast<size_t>(size), 0);
  dataset_sample_index.assign(static_cast<size_t>(size), 0);
  std::vector<int64_t> current(n, 0);
  for (int64_t i = 0; i < size; ++i) {
    const double x = std::max(static_cast<double>(i), 1.0);
    size_t best = 0;
    double best_error = weights[0] * x - static_cast<double>(current[0]);
    for (size_t d = 1; d < n; ++d) {
      const double error = weights[d] * x - static_cast<double>(current[d]);
      if (error > best_error) {
        best_error = error;
        best = d;
      }
    }
    dataset_index[static_cast<size_t>(i)] = static_cast<int16_t>(best);
    dataset_sample_index[static_cast<size_t>(i)] = current[best]++;
  }
}

namespace {

// Megatron's build_exhaustive_blending_indices: exactly sizes[d] samples from dataset d.
void build_exhaustive_blending_indices(const std::vector<int64_t>& sizes,
                                       std::vector<int16_t>& dataset_index,
                                       std::vector<int64_t>& dataset_sample_index) {
  const int64_t total = std::accumulate(sizes.begin(), sizes.end(), int64_t{0});
  std::vector<double> weights(sizes.size());
  for (size_t d = 0; d < sizes.size(); ++d)
    weights[d] = static_cast<double>(sizes[d]) / static_cast<double>(total);
  std::vector<int64_t> counts(sizes.size(), 0);
  std::set<size_t> unspent;
  for (size_t d = 0; d < sizes.size(); ++d) unspent.insert(d);
  dataset_index.clear();
  dataset_sample_index.clear();
  for (int64_t i = 0; !unspent.empty(); ++i) {
    const double x = std::max(static_cast<double>(i), 1.0);
    size_t best = *unspent.begin();
    double best_error = std::numeric_limits<double>::lowest();
    for (size_t d : unspent) {
      const double error = weights[d] * x - static_cast<double>(counts[d]);
      if (error > best_error) {
        best_error = error;
        best = d;
      }
    }
    dataset_index.push_back(static_cast<int16_t>(best));
    dataset_sample_index.push_back(counts[best]++);
    if (counts[best] == sizes[best]) unspent.erase(best);
  }
}

}  // namespace

BlendedDataset::BlendedDataset(std::vector<std::shared_ptr<const TokenSource>> datasets,
                               std::vector<std::string> names, std::vector<double> weights,
                               std::optional<int64_t> size, const std::string& split_name)
    : datasets_(std::move(datasets)), weights_(std::move(weights)) {
  MPLAN_CHECK(!datasets_.empty() && datasets_.size() == weights_.size() &&
                  names.size() == datasets_.size() && datasets_.size() < 32767,
              "blend of ", datasets_.size(), " datasets");
  for (size_t d = 0; d < weights_.size(); ++d) {
    MPLAN_CHECK(datasets_[d] && datasets_[d]->sample_tokens() == datasets_[0]->sample_tokens(),
                "dataset ", d);
    if (!(weights_[d] > 0))
      throw Error(cat("--data-path: the weight of ", names[d], " must be > 0, got ", weights_[d]));
  }
  if (size) {
    weights_ = numpy_normalize(weights_);
    build_blending_indices(weights_, *size, dataset_index_, dataset_sample_index_);
  } else {
    std::vector<int64_t> counts;
    for (double w : weights_) {
      MPLAN_CHECK(w == static_cast<double>(static_cast<int64_t>(w)), "weight ", w);
      counts.push_back(static_cast<int64_t>(w));
    }
    build_exhaustive_blending_indices(counts, dataset_index_, dataset_sample_index_);
  }
  std::vector<int64_t> drawn(datasets_.size(), 0);
  for (int16_t d : dataset_index_) ++drawn[static_cast<size_t>(d)];
  for (size_t d = 0; d < datasets_.size(); ++d)
    if (drawn[d] > datasets_[d]->size())
      throw Error(cat("--data-path: the ", split_name, " blend draws ", drawn[d], " samples from ",
                      names[d], ", which has only ", datasets_[d]->size()));
}

void BlendedDataset::sample(int64_t index, std::span<int32_t> out) const {
  MPLAN_CHECK(index >= 0 && index < size(), "sample ", index, " of ", size());
  datasets_[static_cast<size_t>(dataset_index_[static_cast<size_t>(index)])]->sample(
      dataset_sample_index_[static_cast<size_t>(index)], out);
}

}  // namespace mplan::exec
