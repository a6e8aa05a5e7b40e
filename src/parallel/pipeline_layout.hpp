// PipelineLayout: Megatron-LM's --pipeline-model-parallel-layout, a string of pipeline stages
// ("Ettt|(tt|)*29,m|L"), parsed exactly as PipelineParallelLayerLayout.parse_str_to_list does.
// Invariant: `stages` is in the string's order, which is Megatron's flattened layer order (stage
// index = vp_stage * pp + pp_rank), and `decoder_before[i]` sums the decoder layers of stages < i.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mplan {

// One stage of a layout: how many of each layer kind it holds ('E', 't', 'm', 'L').
struct LayoutStage {
  int32_t embedding = 0;  // 'E'
  int32_t decoder = 0;    // 't' (a transformer layer)
  int32_t mtp = 0;        // 'm' (a multi-token-prediction layer)
  int32_t loss = 0;       // 'L'
  bool operator==(const LayoutStage&) const = default;
};

struct PipelineLayout {
  std::string text;                     // as written (export writes it back)
  std::vector<LayoutStage> stages;      // in flattened layer order
  std::vector<int64_t> decoder_before;  // decoder layers of the stages before each one
  // Facts of the flattened layer order that Megatron's validate_layer_layout checks.
  char first_layer = 0;  // 0 when the layout holds no layer
  char last_layer = 0;
  bool decoder_after_mtp = false;  // a 't' somewhere after the first 'm'
  bool operator==(const PipelineLayout&) const = default;

  int64_t num_stages() const { return static_cast<int64_t>(stages.size()); }
  int64_t count(int32_t LayoutStage::*kind) const;
};

// Longest layout after unrolling repetitions (a layout names at most pp·vpp <= 2^20 stages of
// a model of at most 1024 layers; 2^20 characters is far beyond either).
inline constexpr int64_t kMaxLayoutChars = int64_t{1} << 20;

// Parses `text` as Megatron does: commas dropped, "(...)*n" then "x*n" unrolled (one pass each,
// left to right), split at '|', each character one of E, t, m, L. Throws mplan::Error naming
// `field` on a character outside those or a layout longer than kMaxLayoutChars.
PipelineLayout parse_pipeline_layout(const std::string& text, const std::string& field);

// The layout of `decoder_per_stage` (flattened order) with the embedding in the first stage
// and the loss in the last, written compactly ("Et*7|t*8|t*8|t*7L", runs of equal stages as
// "(t*8|)*2").
PipelineLayout layout_from_counts(const std::vector<int64_t>& decoder_per_stage);

// Megatron's rules for a layout of `num_layers` transformer layers and `mtp_num_layers` MTP
// layers on `pp` pipeline ranks (arguments.py and PipelineParallelLayerLayout's constructor and
// validate_layer_layout), the first one broken, in Megatron's words; nothing when valid. `vpp` is
// the plan's virtual stage count, which must equal the layout's stages / pp.
std::optional<std::string> pipeline_layout_problem(const PipelineLayout& layout, int64_t pp,
                                                   int64_t vpp, int64_t num_layers,
                                                   int64_t mtp_num_layers);

}  // namespace mplan
