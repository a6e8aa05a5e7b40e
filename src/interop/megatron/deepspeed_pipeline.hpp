// Megatron-DeepSpeed's pipeline split as a Megatron-LM layout: the layer specs GPTModelPipe hands
// to DeepSpeed's PipelineModule (megatron/model/gpt_model.py of bigscience-workshop's and
// microsoft's Megatron-DeepSpeed), split by --pp-partition-method as _partition_layers splits
// them (deepspeed_partition.hpp), read back as 'E', 't' and 'L' per stage. Invariant: a layout
// returned puts on each stage exactly the transformer layers DeepSpeed gives it, the embedding on
// the first stage and the output layer on the last; anything else is an Error naming the flag.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "src/model/model_spec.hpp"
#include "src/parallel/parallel_config.hpp"
#include "src/parallel/pipeline_layout.hpp"

namespace mplan {

// The flag, for messages.
inline constexpr const char* kPpPartitionMethodFlag = "--pp-partition-method";

// The two GPTModelPipe variants. bigscience's (BLOOM) takes --pp-partition-method (default
// "type:transformer") and transposes around the transformer layers; microsoft's always splits
// by "type:transformer", has no transposes, and adds a loss function after MoE layers.
enum class MegatronDeepSpeedFork { kBigScience, kMicrosoft };

enum class DsSpecKind { kFunction, kEmbedding, kTransformer, kFinalNorm, kOutput };

// One entry of GPTModelPipe's spec list: the name DeepSpeed matches a "type:" regex against
// (a LayerSpec's class name, a function's __name__), and the trainable parameters one rank builds
// for it (what the "parameters" method weighs; functions 0).
struct DsLayerSpec {
  std::string name;
  DsSpecKind kind = DsSpecKind::kFunction;
  int64_t params = 0;
};

struct DsModelOptions {
  MegatronDeepSpeedFork fork = MegatronDeepSpeedFork::kBigScience;
  bool half_precision = false;   // --fp16 or --bf16: a float16_to_fp32 spec at the end
  bool embed_layernorm = false;  // bigscience's --embed-layernorm: 2h more in EmbeddingPipe
};

// GPTModelPipe's specs for `m` on one rank of `p` (tp, ep, etp shards), in order.
std::vector<DsLayerSpec> gpt_model_pipe_specs(const ModelSpec& m, const ParallelConfig& p,
                                              const DsModelOptions& o);

// DeepSpeed's stage boundaries (num_stages + 1) of `specs` under `method` ("uniform",
// "parameters", "type:REGEX"; case-insensitive as DeepSpeed lowers it). Throws Error naming
// --pp-partition-method for a method DeepSpeed refuses ("profile", unknown), a regex matching no
// spec, or a regex outside the syntax whose matching here is Python's own.
std::vector<int64_t> deepspeed_stage_boundaries(const std::vector<DsLayerSpec>& specs,
                                                const std::string& method, int64_t num_stages);

// The layout of those boundaries: each stage's transformer layers, 'E' on the first and 'L' on
// the last. Throws Error naming --pp-partition-method `method` when the embedding is not on the
// first stage or the output layer not on the last (a split no mplan layout holds).
PipelineLayout deepspeed_layout(const std::vector<DsLayerSpec>& specs,
                                const std::vector<int64_t>& parts, const std::string& method);

}  // namespace mplan
