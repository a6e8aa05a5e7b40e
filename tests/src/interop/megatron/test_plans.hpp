// Plans and helpers the Megatron-LM interop tests share: nine plans that together use every
// exported argument (interleaved with ramp-up, uneven with tp-pp-dp order, MoE with cp and ep,
// virtual stages with an uneven split, a custom MoE shape, a free pipeline layout, the embedding
// and loss counted in the split, Megatron-FSDP, the training loop's data, schedule, evaluation,
// checkpoints and logging), and lookups in an argv.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "src/common/json_reader.hpp"
#include "src/interop/megatron/megatron_import.hpp"
#include "src/plan/plan.hpp"

namespace mplan::megatron_test {

inline Plan plan_of(const std::string& json) {
  return plan_from_json(parse_json(json, "test plan"));
}

// The value(s) following `name` in argv, or {"<absent>"}.
inline std::vector<std::string> values_of(const std::vector<std::string>& argv,
                                          const std::string& name) {
  auto it = std::find(argv.begin(), argv.end(), name);
  if (it == argv.end()) return {"<absent>"};
  std::vector<std::string> out;
  for (++it; it != argv.end() && it->rfind("--", 0) != 0; ++it) out.push_back(*it);
  return out;
}
inline bool has(const std::vector<std::string>& argv, const std::string& name) {
  return std::find(argv.begin(), argv.end(), name) != argv.end();
}
inline bool any_contains(const std::vector<std::string>& v, const std::string& part) {
  for (const auto& s : v)
    if (s.find(part) != std::string::npos) return true;
  return false;
}

inline MegatronImportOptions options_for(const Plan& p) {
  MegatronImportOptions o;
  o.cluster = p.cluster;
  o.model_name = p.model.name;
  return o;
}

// GPT-3 175B on 128 GPUs (16 nodes): interleaved (vpp 2), fp16 with fp32 grads, ramp-up, selective
// recompute, sequence parallel, distributed optimizer with both overlaps.
inline const char* kGpt3Interleaved = R"({
  "schema_version": 1, "model": "gpt3-175b", "cluster": "dgx-a100-80g",
  "parallel": {"tp": 8, "pp": 16, "vpp": 2, "dp": 1, "sequence_parallel": true,
               "micro_batch_size": 1, "global_batch_size": 1536, "recompute": "selective",
               "distributed_optimizer": true, "overlap_grad_reduce": true,
               "overlap_param_gather": true},
  "training": {"precision": "fp16", "grads_in_fp32": true, "lr": 6e-05, "weight_decay": 0.1,
               "init_method_std": 0.006, "train_iters": 500000,
               "rampup_batch_size": [16, 16, 5859375]}
})";

// Llama 3 8B with an uneven pipeline (6 + 10 + 10 + 6 layers), tp-pp-dp order, full block
// recompute, bf16 gradient reduction and unfused attention; 16 GPUs on two nodes.
inline const char* kLlamaUneven = R"({
  "schema_version": 1, "model": "llama3-8b", "cluster": "dgx-h100",
  "parallel": {"tp": 2, "pp": 4, "dp": 2, "sequence_parallel": true, "order": "tp-cp-ep-pp-dp",
               "decoder_first_pipeline_num_layers": 6, "decoder_last_pipeline_num_layers": 6,
               "micro_batch_size": 2, "global_batch_size": 64, "recompute": "full",
               "recompute_method": "block", "recompute_num_layers": 2,
               "overlap_grad_reduce": false},
  "training": {"precision": "bf16", "grads_in_fp32": false, "attention_backend": "unfused",
               "lr": 0.0003, "adam_beta2": 0.999, "seed": 7, "train_iters": 10}
})";

// Mixtral 8x7B: expert parallel 8 with expert tensor parallel 1, context parallel 2.
inline const char* kMixtral = R"({
  "schema_version": 1, "model": "mixtral-8x7b", "cluster": "dgx-h100",
  "parallel": {"tp": 2, "cp": 2, "ep": 8, "etp": 1, "pp": 4, "dp": 2, "sequence_parallel": true,
               "micro_batch_size": 1, "global_batch_size": 256, "distributed_optimizer": true},
  "training": {"precision": "bf16", "train_iters": 1000}
})";

// Virtual stages with an uneven split (4 + 6 + 6 + ... + 4 over pp 4 x vpp 2) and a micro-batch
// group size.
inline const char* kVppUneven = R"({
  "schema_version": 1, "model": "llama3-8b", "cluster": "dgx-a100-80g",
  "parallel": {"tp": 1, "pp": 4, "vpp": 2, "dp": 2, "decoder_first_pipeline_num_layers": 4,
               "decoder_last_pipeline_num_layers": 4, "microbatch_group_size_per_vp_stage": 8,
               "micro_batch_size": 2, "global_batch_size": 64},
  "training": {"precision": "bf16", "train_iters": 5}
})";

// A model no preset has: MoE every 2nd layer with a shared expert, explicit head dim, learned
// positions, fp32; 4 GPUs on an 8-GPU node.
inline const char* kCustomMoe = R"({
  "schema_version": 1,
  "model": {"name": "tiny-moe", "num_layers": 4, "hidden_size": 256, "num_attention_heads": 4,
            "num_query_groups": 2, "kv_channels": 80, "ffn_hidden_size": 1024,
            "vocab_size": 1000, "make_vocab_size_divisible_by": 64, "seq_length": 512,
            "max_position_embeddings": 1024, "activation": "swiglu", "normalization": "rmsnorm",
            "position_embedding": "learned", "tied_embeddings": false, "add_bias_linear": false,
            "moe": {"num_experts": 4, "topk": 1, "moe_ffn_hidden_size": 512,
                    "shared_expert_ffn_hidden_size": 256, "layer_freq": 2}},
  "cluster": "dgx-a100-80g",
  "parallel": {"tp": 2, "ep": 2, "pp": 1, "dp": 2, "micro_batch_size": 4, "global_batch_size": 32},
  "training": {"precision": "fp32", "lr": 0.001, "clip_grad": 0.5, "adam_eps": 1e-06,
               "train_iters": 3}
})";

// Llama 3.1 405B at pp 16 with a free layout: 7 layers beside the embedding, 8 on each middle
// stage, 7 beside the loss (126 layers); 128 GPUs.
inline const char* kLlama405bLayout = R"({
  "schema_version": 1, "model": "llama3-405b", "cluster": "dgx-h100",
  "parallel": {"tp": 8, "pp": 16, "dp": 1, "sequence_parallel": true,
               "pipeline_model_parallel_layout": "Et*7|(t*8|)*14t*7L",
               "micro_batch_size": 1, "global_batch_size": 64, "distributed_optimizer": true},
  "training": {"precision": "bf16", "train_iters": 10}
})";

// Llama 3.1 405B as NeMo / Megatron-Bridge's pretraining recipe lays it out: tp 8, cp 2, pp 8,
// vpp 8, the embedding and the loss each counted as a layer (126 + 2 = 128: 2 per chunk).
inline const char* kLlama405bAccountFor = R"({
  "schema_version": 1, "model": "llama3-405b", "cluster": "dgx-h100",
  "parallel": {"tp": 8, "cp": 2, "pp": 8, "vpp": 8, "dp": 1, "sequence_parallel": true,
               "account_for_embedding_in_pipeline_split": true,
               "account_for_loss_in_pipeline_split": true,
               "micro_batch_size": 1, "global_batch_size": 64, "distributed_optimizer": true},
  "training": {"precision": "bf16", "train_iters": 10}
})";

// Llama 3 8B with Megatron-FSDP (ZeRO-3, double buffers) on 16 GPUs in two optimizer instances,
// with the precision-aware optimizer's bf16 moments.
inline const char* kFsdp = R"({
  "schema_version": 1, "model": "llama3-8b", "cluster": "dgx-h100",
  "parallel": {"tp": 1, "pp": 1, "dp": 16, "micro_batch_size": 1, "global_batch_size": 64,
               "distributed_optimizer": true, "use_megatron_fsdp": true,
               "data_parallel_sharding_strategy": "optim_grads_params",
               "fsdp_double_buffer": true, "num_distributed_optimizer_instances": 2},
  "training": {"precision": "bf16", "train_iters": 10, "use_precision_aware_optimizer": true,
               "exp_avg_dtype": "bf16", "exp_avg_sq_dtype": "bf16"}
})";

// GPT-3 1.3B on 4 GPUs as `mplan run` trains it: a blend of two indexed datasets (a prefix with
// a space), GPT-2 BPE files, a cosine schedule with warmup, evaluation, checkpoints, TensorBoard.
inline const char* kTrainingLoop = R"({
  "schema_version": 1, "model": "gpt3-1.3b", "cluster": "h200x4",
  "parallel": {"tp": 1, "pp": 1, "dp": 4, "micro_batch_size": 4, "global_batch_size": 64},
  "training": {"precision": "bf16", "lr": 0.0003, "min_lr": 3e-05, "lr_decay_style": "cosine",
               "lr_decay_iters": 900, "lr_warmup_iters": 10, "lr_warmup_init": 1e-05,
               "train_iters": 1000, "seed": 42,
               "data_path": [0.3, "data/a_text_document", 0.7, "data/b text_document"],
               "split": "949,50,1", "vocab_file": "gpt2/vocab.json",
               "merge_file": "gpt2/merges.txt", "eval_interval": 200, "eval_iters": 5,
               "save": "ckpt", "load": "ckpt", "save_interval": 250, "log_interval": 10,
               "tensorboard_dir": "tb"}
})";

inline const char* const kAllPlans[] = {kGpt3Interleaved,     kLlamaUneven, kMixtral,
                                        kVppUneven,           kCustomMoe,   kLlama405bLayout,
                                        kLlama405bAccountFor, kFsdp,        kTrainingLoop};

}  // namespace mplan::megatron_test
