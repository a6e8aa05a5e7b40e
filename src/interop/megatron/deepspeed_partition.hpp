// DeepSpeed's pipeline partitioning: how PipelineModule._partition_layers splits a list of layer
// specs over pipeline stages (deepspeed/runtime/pipe/module.py) with partition_uniform and
// partition_balanced (deepspeed/runtime/utils.py, DeepSpeed >= 0.12.5). Invariant: a result has
// num_parts + 1 non-decreasing boundaries from 0 to the item count; stage s holds the items
// [parts[s], parts[s + 1]).
#pragma once

#include <cstdint>
#include <vector>

namespace mplan {

// Stage boundaries of `num_items` items over `num_parts` parts: chunks of num_items / num_parts,
// the remainder one more each on the first parts; with no more items than parts, one item per
// part and the rest empty. num_items >= 0, num_parts >= 1.
std::vector<int64_t> partition_uniform(int64_t num_items, int64_t num_parts);

// Stage boundaries of `weights` (>= 0) over `num_parts` parts that minimize the spread (heaviest
// part minus lightest) by DeepSpeed's dynamic program, its ties resolved as DeepSpeed resolves
// them (the last split point of equal cost wins). No more items than parts: partition_uniform.
std::vector<int64_t> partition_balanced(const std::vector<int64_t>& weights, int64_t num_parts);

}  // namespace mplan
