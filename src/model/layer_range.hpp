// LayerRange: which transformer layers a pipeline stage (and each of its virtual stages) builds,
// exactly as Megatron-LM assigns them (get_num_layers_to_build and
// get_transformer_layer_offset): an even split over pp x vpp, the uneven split set by
// decoder_first/last_pipeline_num_layers, the split that counts the embedding / loss as layers
// (account_for_*_in_pipeline_split), or a free pipeline_model_parallel_layout. Invariant: callers
// pass a plan that validate() accepts (a split Megatron would refuse is a broken invariant here,
// not a user error).
#pragma once

#include <cstdint>
#include <vector>

#include "src/parallel/parallel_config.hpp"

namespace mplan {

struct LayerRange {
  int64_t first = 0;  // global index (0-based) of the first layer
  int64_t count = 0;  // consecutive layers
  bool operator==(const LayerRange&) const = default;
};

// Transformer layers on pipeline rank `pp_rank` (all its virtual stages together).
int64_t layers_on_stage(int64_t num_layers, const ParallelConfig& p, int64_t pp_rank);

// The layers of model chunk `vp_stage` (0 .. vpp-1) on pipeline rank `pp_rank`.
LayerRange chunk_layers(int64_t num_layers, const ParallelConfig& p, int64_t pp_rank,
                        int64_t vp_stage);

// The chunks of `pp_rank` in model order (vp_stage 0 first).
std::vector<LayerRange> stage_chunks(int64_t num_layers, const ParallelConfig& p, int64_t pp_rank);

}  // namespace mplan
