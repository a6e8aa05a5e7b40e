// Megatron-LM's layer placement: megatron/core/transformer/transformer_block.py
// get_num_layers_to_build() for the count and transformer_layer.py
// get_transformer_layer_offset() for the first layer of each (pipeline rank, virtual stage).
#include "src/model/layer_range.hpp"

#include "src/common/error.hpp"

namespace mplan {

namespace {

bool uneven(const ParallelConfig& p) {
  return p.decoder_first_pipeline_num_layers.has_value() ||
         p.decoder_last_pipeline_num_layers.has_value();
}

struct UnevenSplit {
  int64_t first = 0;          // layers on the first stage (0: not set)
  int64_t last = 0;           // layers on the last stage (0: not set)
  int64_t middle_stages = 0;  // stages that share the rest evenly
  int64_t middle_layers = 0;  // layers they share
  int64_t per_middle() const { return middle_stages > 0 ? middle_layers / middle_stages : 0; }
};

UnevenSplit uneven_split(int64_t num_layers, const ParallelConfig& p) {
  UnevenSplit s;
  s.first = p.decoder_first_pipeline_num_layers.value_or(0);
  s.last = p.decoder_last_pipeline_num_layers.value_or(0);
  s.middle_stages = p.pp - (p.decoder_first_pipeline_num_layers ? 1 : 0) -
                    (p.decoder_last_pipeline_num_layers ? 1 : 0);
  s.middle_layers = num_layers - s.first - s.last;
  MPLAN_CHECK(s.middle_stages >= 0 && s.middle_layers >= 0 &&
                  (s.middle_stages == 0) == (s.middle_layers == 0) &&
                  (s.middle_stages == 0 || s.middle_layers % s.middle_stages == 0),
              "uneven pipeline split not validated: num_layers ", num_layers, ", pp ", p.pp);
  return s;
}

bool accounts_for_ends(const ParallelConfig& p) {
  return p.account_for_embedding_in_pipeline_split || p.account_for_loss_in_pipeline_split;
}

// A layout's (pipeline rank, virtual stage): PipelineParallelLayerLayout.get_num_layers_to_build
// and get_layer_offset for the decoder layers.
LayerRange layout_chunk(const PipelineLayout& l, const ParallelConfig& p, int64_t pp_rank,
                        int64_t vp_stage) {
  const int64_t i = vp_stage * p.pp + pp_rank;
  MPLAN_CHECK(l.num_stages() == p.pp * p.vpp, "layout of ", l.num_stages(),
              " stages not validated for pp ", p.pp, " x vpp ", p.vpp);
  const auto k = static_cast<size_t>(i);
  return {l.decoder_before[k], l.stages[k].decoder};
}

// account_for_embedding/loss_in_pipeline_split: the embedding and the loss each count as one
// layer of an even split, and their stage builds one transformer layer fewer
// (transformer_block.py get_num_layers_to_build, transformer_layer.py
// get_transformer_layer_offset).
LayerRange ends_chunk(int64_t num_layers, const ParallelConfig& p, int64_t pp_rank,
                      int64_t vp_stage) {
  const bool emb = p.account_for_embedding_in_pipeline_split;
  const bool loss = p.account_for_loss_in_pipeline_split;
  const int64_t total = num_layers + (emb ? 1 : 0) + (loss ? 1 : 0);
  MPLAN_CHECK(total % p.pp == 0 && (total / p.pp) % p.vpp == 0, "split of ", total,
              " layers (with embedding / loss) not validated for pp ", p.pp, " x vpp ", p.vpp);
  const int64_t per_chunk = total / p.pp / p.vpp;
  const bool first = pp_rank == 0 && vp_stage == 0;
  const bool last = pp_rank == p.pp - 1 && vp_stage == p.vpp - 1;
  LayerRange r;
  r.count = per_chunk - (emb && first ? 1 : 0) - (loss && last ? 1 : 0);
  r.first =
      p.pp == 1 ? 0 : vp_stage * (total / p.vpp) + pp_rank * per_chunk - (emb && !first ? 1 : 0);
  MPLAN_CHECK(r.count >= 0, "no layer left for the embedding / loss stage");
  return r;
}

}  // namespace

int64_t layers_on_stage(int64_t num_layers, const ParallelConfig& p, int64_t pp_rank) {
  MPLAN_CHECK(pp_rank >= 0 && pp_rank < p.pp, "pp_rank ", pp_rank, " of pp ", p.pp);
  if (p.pipeline_model_parallel_layout || accounts_for_ends(p)) {
    int64_t n = 0;
    for (int64_t v = 0; v < p.vpp; ++v) n += chunk_layers(num_layers, p, pp_rank, v).count;
    return n;
  }
  if (!uneven(p)) {
    MPLAN_CHECK(num_layers % p.pp == 0, "num_layers ", num_layers, " not divisible by pp ", p.pp);
    return num_layers / p.pp;
  }
  UnevenSplit s = uneven_split(num_layers, p);
  int64_t n = s.per_middle();
  if (pp_rank == 0 && p.decoder_first_pipeline_num_layers) n = s.first;
  if (pp_rank == p.pp - 1 && p.decoder_last_pipeline_num_layers) n = s.last;
  return n;
}

LayerRange chunk_layers(int64_t num_layers, const ParallelConfig& p, int64_t pp_rank,
                        int64_t vp_stage) {
  MPLAN_CHECK(vp_stage >= 0 && vp_stage < p.vpp, "vp_stage ", vp_stage, " of vpp ", p.vpp);
  MPLAN_CHECK(pp_rank >= 0 && pp_rank < p.pp, "pp_rank ", pp_rank, " of pp ", p.pp);
  if (p.pipeline_model_parallel_layout)
    return layout_chunk(*p.pipeline_model_parallel_layout, p, pp_rank, vp_stage);
  if (accounts_for_ends(p)) return ends_chunk(num_layers, p, pp_rank, vp_stage);
  const int64_t on_stage = layers_on_stage(num_layers, p, pp_rank);
  MPLAN_CHECK(on_stage % p.vpp == 0, "layers on stage ", on_stage, " not divisible by vpp ", p.vpp);
  LayerRange r;
  r.count = on_stage / p.vpp;
  if (p.pp == 1) return r;  // one stage (and then vpp is 1): offset 0
  if (!uneven(p)) {
    // vp_stage * (L / vpp) + pp_rank * (L / pp / vpp); with vpp 1 this is pp_rank * L / pp.
    r.first = vp_stage * (num_layers / p.vpp) + pp_rank * r.count;
    return r;
  }
  UnevenSplit s = uneven_split(num_layers, p);
  const int64_t middle_rank = p.decoder_first_pipeline_num_layers ? pp_rank - 1 : pp_rank;
  if (p.vpp == 1) {
    r.first = pp_rank == 0 ? 0 : middle_rank * s.per_middle() + s.first;
    return r;
  }
  // Layers per model chunk: first-stage chunk, all middle stages' chunks together, last-stage
  // chunk; a chunk index spans all three (Megatron's total_virtual_chunks).
  const int64_t first_chunk = s.first / p.vpp;
  const int64_t middle_chunk = s.middle_layers / p.vpp;
  const int64_t last_chunk = s.last / p.vpp;
  const int64_t per_index = first_chunk + middle_chunk + last_chunk;
  const int64_t per_middle_rank = s.middle_stages > 0 ? middle_chunk / s.middle_stages : 0;
  r.first = pp_rank == 0 ? vp_stage * per_index
                         : vp_stage * per_index + first_chunk + middle_rank * per_middle_rank;
  return r;
}

std::vector<LayerRange> stage_chunks(int64_t num_layers, const ParallelConfig& p, int64_t pp_rank) {
  std::vector<LayerRange> chunks;
  chunks.reserve(static_cast<size_t>(p.vpp));
  for (int64_t v = 0; v < p.vpp; ++v) chunks.push_back(chunk_layers(num_layers, p, pp_rank, v));
  return chunks;
}

}  // namespace mplan
