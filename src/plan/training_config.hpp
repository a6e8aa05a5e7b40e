// TrainingConfig: precision, optimizer and data settings of a plan ("training" in the plan file),
// named after Megatron-LM's arguments. All fields have Megatron-like defaults.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "src/batch/rampup_batch_size.hpp"
#include "src/common/json_reader.hpp"

namespace mplan {

enum class Precision { kBf16, kFp16, kFp32 };
enum class AttentionBackend { kFlash, kUnfused };

const char* to_string(Precision p);
const char* to_string(AttentionBackend a);
// Bytes per element of the parameters / activations for a precision.
int64_t bytes_per_element(Precision p);

struct TrainingConfig {
  Precision precision = Precision::kBf16;   // --bf16 / --fp16 / neither
  bool grads_in_fp32 = true;                // --accumulate-allreduce-grads-in-fp32 (main grads)
  AttentionBackend attention_backend = AttentionBackend::kFlash;  // --attention-backend
                                          // (default: flash, unfused for fp32)
  double lr = 1e-4;                         // --lr
  double weight_decay = 0.1;                // --weight-decay
  double adam_beta1 = 0.9;                  // --adam-beta1
  double adam_beta2 = 0.95;                 // --adam-beta2
  double adam_eps = 1e-8;                   // --adam-eps
  double clip_grad = 1.0;                   // --clip-grad (0: off)
  double init_method_std = 0.02;            // --init-method-std
  int64_t seed = 1234;                      // --seed
  int64_t train_iters = 0;                  // --train-iters (0: not set)
  std::optional<RampupBatchSize> rampup_batch_size;
  bool operator==(const TrainingConfig&) const = default;
};

TrainingConfig training_from_json(const Json& j, const std::string& path);
Json training_to_json(const TrainingConfig& t);

}  // namespace mplan
