// LowPrecision: what a plan's fp8 / fp4 settings mean for its tensors, the one place both the
// simulator and the validation ask: which transformer layers run their GEMMs in FP8 / FP4
// (Megatron-LM's is_first_last_bf16_layer), and how many bytes a quantized element takes with
// its scales. Invariant: a plan without fp8_format and fp4_format has no low-precision layer.
#pragma once

#include <cstdint>

#include "src/plan/training_config.hpp"

namespace mplan {

enum class GemmPrecision { kBf16, kFp8, kFp4 };
const char* to_string(GemmPrecision p);  // "bf16", "fp8", "fp4"

// The precision of the transformer layers' GEMMs (the 16-bit type when neither fp8 nor fp4).
GemmPrecision gemm_precision(const TrainingConfig& t);
inline bool low_precision(const TrainingConfig& t) {
  return gemm_precision(t) != GemmPrecision::kBf16;
}

// True when layer `layer` (0-based, global) of `num_layers` runs its GEMMs in fp8 / fp4:
// megatron/core/fp8_utils.py is_first_last_bf16_layer keeps the first num_layers_at_start_in_bf16
// and the last num_layers_at_end_in_bf16 layers in bf16 when first_last_layers_bf16.
bool layer_in_low_precision(const TrainingConfig& t, int64_t num_layers, int64_t layer);

// Bytes of one quantized element with its share of the scale factors (Transformer Engine's
// recipes): tensorwise and delayed scaling 1 (one fp32 scale per tensor); blockwise 1 + 4/128
// (an fp32 scale per 1x128 block); MXFP8 1 + 1/32 (an E8M0 scale per 32 elements); NVFP4
// 0.5 + 1/16 (an E4M3 scale per 16 elements; the per-tensor fp32 scale is negligible).
// 2 (bf16) when not low precision.
double quantized_bytes_per_element(const TrainingConfig& t);

// Passes over the 16-bit input a quantization kernel reads: 2 for tensorwise current scaling (an
// amax reduction before the cast), 1 for the others (delayed scaling casts with the previous
// steps' amax and records the new amax in the same kernel; blockwise, MXFP8 and NVFP4 compute
// each block's scale in the kernel that casts it).
int64_t quantize_read_passes(const TrainingConfig& t);

}  // namespace mplan
