// DeepSpeed's partition_uniform and partition_balanced, with integers in place of numpy floats.
// The weights are parameter counts or 0/1 flags, whose sums stay far below 2^53, where numpy's
// float64 sums are exact too; so every comparison (and every tie) falls as in DeepSpeed.
// Its table entries that stay at infinity are states no split reaches; skipping them changes no
// result, since a reachable split point always exists and beats them.
#include "src/interop/megatron/deepspeed_partition.hpp"

#include <algorithm>

#include "src/common/error.hpp"

namespace mplan {

std::vector<int64_t> partition_uniform(int64_t num_items, int64_t num_parts) {
  MPLAN_CHECK(num_items >= 0 && num_parts >= 1, "partition of ", num_items, " over ", num_parts);
  std::vector<int64_t> parts(static_cast<size_t>(num_parts + 1));
  if (num_items <= num_parts) {
    for (int64_t p = 0; p <= num_parts; ++p) parts[static_cast<size_t>(p)] = std::min(p, num_items);
    return parts;
  }
  // arange(0, (parts + 1) * chunk, chunk), then +1 on every boundary after each of the first
  // `residual` parts.
  const int64_t chunk = num_items / num_parts;
  const int64_t residual = num_items - chunk * num_parts;
  for (int64_t p = 0; p <= num_parts; ++p)
    parts[static_cast<size_t>(p)] = p * chunk + std::min(p, residual);
  return parts;
}

namespace {

// dp_max, dp_min, dp_cost and position of DeepSpeed's table at one (i, j). `reached` false is
// its infinity; `min_unset` is dp_min[0][0], which DeepSpeed leaves at infinity.
struct Cell {
  bool reached = false;
  bool min_unset = false;
  int64_t max_sum = 0, min_sum = 0, cost = 0;
  int64_t position = 0;
};

}  // namespace

std::vector<int64_t> partition_balanced(const std::vector<int64_t>& weights, int64_t num_parts) {
  const auto n = static_cast<int64_t>(weights.size());
  const int64_t m = num_parts;
  if (n <= m) return partition_uniform(n, m);

  std::vector<int64_t> prefix(static_cast<size_t>(n + 1), 0);
  for (int64_t i = 0; i < n; ++i) {
    MPLAN_CHECK(weights[static_cast<size_t>(i)] >= 0, "negative partition weight");
    prefix[static_cast<size_t>(i + 1)] =
        prefix[static_cast<size_t>(i)] + weights[static_cast<size_t>(i)];
  }
  const auto width = static_cast<size_t>(m + 1);
  std::vector<Cell> dp(static_cast<size_t>(n + 1) * width);
  auto at = [&](int64_t i, int64_t j) -> Cell& {
    return dp[static_cast<size_t>(i) * width + static_cast<size_t>(j)];
  };
  at(0, 0) = Cell{true, true, 0, 0, 0, 0};
  for (int64_t i = 1; i <= n; ++i) {
    for (int64_t j = 1; j <= std::min(i, m); ++j) {
      Cell& best = at(i, j);
      for (int64_t k = 0; k < i; ++k) {
        const Cell& prev = at(k, j - 1);
        if (!prev.reached) continue;
        const int64_t part = prefix[static_cast<size_t>(i)] - prefix[static_cast<size_t>(k)];
        const int64_t max_sum = std::max(prev.max_sum, part);
        const int64_t min_sum = prev.min_unset ? part : std::min(prev.min_sum, part);
        const int64_t cost = max_sum - min_sum;
        if (!best.reached || best.cost >= cost)  // ">=": the last k of equal cost wins
          best = Cell{true, false, max_sum, min_sum, cost, k};
      }
    }
  }
  std::vector<int64_t> parts{n};
  for (int64_t j = m; j >= 1; --j) parts.push_back(at(parts.back(), j).position);
  std::reverse(parts.begin(), parts.end());
  return parts;
}

}  // namespace mplan
