// Which layers and tensors a plan's fp8 / fp4 settings cover. Sources: Megatron-LM
// megatron/core/fp8_utils.py (is_first_last_bf16_layer), Transformer Engine's recipes
// (transformer_engine/common/recipe: DelayedScaling, Float8CurrentScaling, Float8BlockScaling,
// MXFP8BlockScaling, NVFP4BlockScaling) for the scale layouts.
#include "src/plan/low_precision.hpp"

namespace mplan {

const char* to_string(GemmPrecision p) {
  return p == GemmPrecision::kFp8 ? "fp8" : p == GemmPrecision::kFp4 ? "fp4" : "bf16";
}

GemmPrecision gemm_precision(const TrainingConfig& t) {
  if (t.fp8_format != Fp8Format::kNone) return GemmPrecision::kFp8;
  if (t.fp4_format != Fp4Format::kNone) return GemmPrecision::kFp4;
  return GemmPrecision::kBf16;
}

bool layer_in_low_precision(const TrainingConfig& t, int64_t num_layers, int64_t layer) {
  if (!low_precision(t)) return false;
  if (!t.first_last_layers_bf16) return true;
  const bool first = layer < t.num_layers_at_start_in_bf16;
  const bool last = layer >= num_layers - t.num_layers_at_end_in_bf16;
  return !(first || last);
}

double quantized_bytes_per_element(const TrainingConfig& t) {
  switch (gemm_precision(t)) {
    case GemmPrecision::kBf16:
      return 2.0;
    case GemmPrecision::kFp4:
      return 0.5 + 1.0 / 16;
    case GemmPrecision::kFp8:
      break;
  }
  switch (t.fp8_recipe) {
    case Fp8Recipe::kBlockwise:
      return 1.0 + 4.0 / 128;
    case Fp8Recipe::kMxfp8:
      return 1.0 + 1.0 / 32;
    case Fp8Recipe::kTensorwise:
    case Fp8Recipe::kDelayed:
      break;
  }
  return 1.0;
}

int64_t quantize_read_passes(const TrainingConfig& t) {
  return gemm_precision(t) == GemmPrecision::kFp8 && t.fp8_recipe == Fp8Recipe::kTensorwise ? 2 : 1;
}

}  // namespace mplan
