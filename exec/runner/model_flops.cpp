// megatron_model_flops(): transformer_flops() of Megatron's training.py for a dense GPT.
#include "exec/runner/model_flops.hpp"

namespace mplan::exec {

double megatron_model_flops(const Plan& plan) {
  const ModelSpec& m = plan.model;
  const double batch = static_cast<double>(plan.parallel.global_batch_size);
  const double s = static_cast<double>(m.seq_length), h = static_cast<double>(m.hidden_size);
  const double layers = static_cast<double>(m.num_layers);
  const double q = static_cast<double>(m.kv_channels * m.num_attention_heads);
  const double kv = static_cast<double>(m.kv_channels * m.num_query_groups);
  const double ffn = static_cast<double>(m.ffn_hidden_size);
  const double vocab = static_cast<double>(m.padded_vocab_size(plan.parallel.tp));
  const double ffn_factor = m.activation == Activation::kSwiglu ? 3.0 : 2.0;
  const double expand = 3.0 * 2.0;  // forward + 2 backward GEMMs, 2 FLOPs per multiply-add
  double per_token = expand * h * ffn * ffn_factor * layers          // MLP
                     + expand * (h * (q + 2 * kv) + q * h) * layers  // QKV + projection
                     + expand * h * vocab;                           // logits
  double core_per_layer = expand * q / 2.0 * 2.0;                    // causal QK^T and PV
  return batch * s * per_token + batch * s * s * core_per_layer * layers;
}

}  // namespace mplan::exec
