// RecomputeGroup: which layers of a model chunk full recomputation runs again together in the
// backward pass, as Megatron-LM's TransformerBlock does (transformer_block.py
// _checkpointed_forward): "uniform" checkpoints the input of every group of recompute_num_layers
// consecutive layers of the chunk; "block" checkpoints the first recompute_num_layers layers of the
// chunk one by one and stores the rest whole. The executor's activation slots and the simulator's
// chunk costs both take their groups from here.
#pragma once

#include <cstdint>
#include <optional>

#include "src/parallel/parallel_config.hpp"

namespace mplan {

// A group of layers recomputed together: local indices in the chunk, inclusive. Only the input of
// `first` is kept from the forward pass; the group runs again when the backward reaches `last`.
struct RecomputeGroup {
  int64_t first = 0;
  int64_t last = 0;
  int64_t size() const { return last - first + 1; }
  bool operator==(const RecomputeGroup&) const = default;
};

// The group of local layer `local` (0 .. num_layers - 1) of a chunk of `num_layers` layers, or
// nullopt when the layer keeps all its activations (recompute other than full, or "block" past
// the first recompute_num_layers layers).
std::optional<RecomputeGroup> full_recompute_group(const ParallelConfig& p, int64_t num_layers,
                                                   int64_t local);

}  // namespace mplan
