// Model FLOPs of one training iteration by Megatron-LM's formula (num_floating_point_operations in
// megatron/training/training.py, dense transformer path, no recomputation): 3 GEMM passes
// (forward, dgrad, wgrad) x 2 FLOPs per multiply-add over QKV, projection, MLP and logit GEMMs,
// plus the causal core attention (QK^T and PV, half the s x s square). Used for TFLOP/s and MFU.
// Kept here, small, until the shared model statistics (src/model) provide it.
#pragma once

#include "src/plan/plan.hpp"

namespace mplan::exec {

// FLOPs of one iteration (global batch) of `plan`'s model; the vocabulary padded for its tp.
double megatron_model_flops(const Plan& plan);

}  // namespace mplan::exec
