// The rules of a plan's fp8 / fp4 settings that involve the GPU, the model or the parallel layout
// (the single-field rules are in training_from_json): Transformer Engine's hardware checks and
// Megatron-LM's TransformerConfig / arguments.py rules, each a Violation naming its field.
// Invariant: adds nothing for a plan without fp8_format and fp4_format.
#pragma once

#include <vector>

#include "src/plan/plan.hpp"
#include "src/plan/validate.hpp"

namespace mplan {

// Compute capabilities Transformer Engine requires (transformer_engine/pytorch/fp8.py,
// check_fp8_support / check_fp8_block_scaling_support / check_mxfp8_support /
// check_nvfp4_support): FP8 8.9 (Ada, Hopper and later), blockwise FP8 9.0, MXFP8 and NVFP4 10.0
// (Blackwell).
inline constexpr double kFp8MinComputeCapability = 8.9;
inline constexpr double kBlockwiseMinComputeCapability = 9.0;
inline constexpr double kBlackwellComputeCapability = 10.0;

void append_precision_violations(const Plan& plan, std::vector<Violation>& out);

}  // namespace mplan
