// Full recomputation's groups (transformer_block.py _checkpointed_forward).
#include "src/model/recompute_group.hpp"

#include <algorithm>

#include "src/common/error.hpp"

namespace mplan {

std::optional<RecomputeGroup> full_recompute_group(const ParallelConfig& p, int64_t num_layers,
                                                   int64_t local) {
  MPLAN_CHECK(local >= 0 && local < num_layers, "layer ", local, " of a chunk of ", num_layers);
  if (p.recompute != Recompute::kFull) return std::nullopt;
  const int64_t group = std::max<int64_t>(1, p.recompute_num_layers);
  if (p.recompute_method == RecomputeMethod::kUniform) {
    // "uniform": groups of `group` layers from the chunk's first, the last one possibly shorter.
    const int64_t first = local / group * group;
    return RecomputeGroup{first, std::min(first + group, num_layers) - 1};
  }
  // "block": the chunk's first `group` layers, one by one.
  if (local < group) return RecomputeGroup{local, local};
  return std::nullopt;
}

}  // namespace mplan
