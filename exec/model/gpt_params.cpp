// make_gpt_params(): the parameter list and its sharding; init_param_shard(): Megatron's init
// (normal(0, std) for weights and embeddings, std/sqrt(2L) for linear_proj and linear_fc2,
// zero biases, unit norm weights) evaluated only at this rank's elements of the full tensor.
#include "exec/model/gpt_params.hpp"

#include <cmath>

#include "exec/model/init_rng.hpp"
#include "src/common/error.hpp"

namespace mplan::exec {

namespace {

int64_t align_up(int64_t v) {
  return (v + kParamAlignElems - 1) / kParamAlignElems * kParamAlignElems;
}

int add(GptParams& p, const GptDims& d, std::string name, int ndim, int64_t rows, int64_t cols,
        ShardKind shard, InitKind init) {
  ParamSpec s;
  s.name = std::move(name);
  s.ndim = ndim;
  s.rows = rows;
  s.cols = cols;
  s.shard = shard;
  s.init = init;
  s.weight_decay = ndim == 2;  // biases and norm weights are 1-D
  s.tp_duplicated = shard == ShardKind::kReplicated;
  s.local_rows = rows;
  s.local_cols = cols;
  switch (shard) {
    case ShardKind::kReplicated:
      break;
    case ShardKind::kRows:
    case ShardKind::kQkvRows:
      MPLAN_CHECK(rows % d.tp == 0, s.name, ": rows ", rows, " by tp ", d.tp);
      s.local_rows = rows / d.tp;
      break;
    case ShardKind::kCols:
      MPLAN_CHECK(cols % d.tp == 0, s.name, ": cols ", cols, " by tp ", d.tp);
      s.local_cols = cols / d.tp;
      break;
  }
  s.offset = p.total_elems;
  p.total_elems = align_up(p.total_elems + s.local_numel());
  p.specs.push_back(std::move(s));
  return static_cast<int>(p.specs.size()) - 1;
}

}  // namespace

GptParams make_gpt_params(const GptDims& d) {
  GptParams p;
  const int64_t h = d.hidden, q = d.heads * d.head_dim;
  using S = ShardKind;
  using I = InitKind;
  p.wte = add(p, d, "embedding.word_embeddings.weight", 2, d.vocab, h, S::kRows, I::kNormal);
  p.wpe = add(p, d, "embedding.position_embeddings.weight", 2, d.max_positions, h, S::kReplicated,
              I::kNormal);
  for (int64_t l = 0; l < d.layers; ++l) {
    std::string pre = cat("decoder.layers.", l, ".");
    LayerParams lp;
    lp.ln1_w = add(p, d, pre + "input_layernorm.weight", 1, h, 1, S::kReplicated, I::kOne);
    lp.ln1_b = add(p, d, pre + "input_layernorm.bias", 1, h, 1, S::kReplicated, I::kZero);
    lp.proj_w =
        add(p, d, pre + "self_attention.linear_proj.weight", 2, h, q, S::kCols, I::kScaledNormal);
    lp.proj_b =
        add(p, d, pre + "self_attention.linear_proj.bias", 1, h, 1, S::kReplicated, I::kZero);
    lp.qkv_w =
        add(p, d, pre + "self_attention.linear_qkv.weight", 2, 3 * q, h, S::kQkvRows, I::kNormal);
    lp.qkv_b =
        add(p, d, pre + "self_attention.linear_qkv.bias", 1, 3 * q, 1, S::kQkvRows, I::kZero);
    lp.ln2_w = add(p, d, pre + "pre_mlp_layernorm.weight", 1, h, 1, S::kReplicated, I::kOne);
    lp.ln2_b = add(p, d, pre + "pre_mlp_layernorm.bias", 1, h, 1, S::kReplicated, I::kZero);
    lp.fc1_w = add(p, d, pre + "mlp.linear_fc1.weight", 2, d.ffn, h, S::kRows, I::kNormal);
    lp.fc1_b = add(p, d, pre + "mlp.linear_fc1.bias", 1, d.ffn, 1, S::kRows, I::kZero);
    lp.fc2_w = add(p, d, pre + "mlp.linear_fc2.weight", 2, h, d.ffn, S::kCols, I::kScaledNormal);
    lp.fc2_b = add(p, d, pre + "mlp.linear_fc2.bias", 1, h, 1, S::kReplicated, I::kZero);
    // Sequence parallelism: norms and row-parallel biases see only this rank's sequence shard.
    for (int i : {lp.ln1_w, lp.ln1_b, lp.proj_b, lp.ln2_w, lp.ln2_b, lp.fc2_b})
      p.specs[static_cast<size_t>(i)].sp_grad_reduce = true;
    p.layers.push_back(lp);
  }
  p.lnf_w = add(p, d, "decoder.final_layernorm.weight", 1, h, 1, S::kReplicated, I::kOne);
  p.lnf_b = add(p, d, "decoder.final_layernorm.bias", 1, h, 1, S::kReplicated, I::kZero);
  p.specs[static_cast<size_t>(p.lnf_w)].sp_grad_reduce = true;
  p.specs[static_cast<size_t>(p.lnf_b)].sp_grad_reduce = true;
  return p;
}

int64_t full_index(const ParamSpec& s, const GptDims& d, int64_t i) {
  int64_t r = i / s.local_cols, c = i % s.local_cols;
  switch (s.shard) {
    case ShardKind::kReplicated:
      return i;
    case ShardKind::kRows:
      return (d.tp_rank * s.local_rows + r) * s.cols + c;
    case ShardKind::kQkvRows: {
      int64_t block_local = s.local_rows / 3, block_full = s.rows / 3;
      int64_t which = r / block_local, within = r % block_local;
      return (which * block_full + d.tp_rank * block_local + within) * s.cols + c;
    }
    case ShardKind::kCols:
      return r * s.cols + d.tp_rank * s.local_cols + c;
  }
  return -1;
}

void init_param_shard(const ParamSpec& s, int param_index, const GptDims& d, uint64_t seed,
                      double init_method_std, int64_t begin, int64_t end, float* out) {
  MPLAN_CHECK(begin >= 0 && begin <= end && end <= s.local_numel(), s.name, ": elements [", begin,
              ", ", end, ")");
  if (s.init == InitKind::kZero || s.init == InitKind::kOne) {
    float v = s.init == InitKind::kOne ? 1.0f : 0.0f;
    for (int64_t i = begin; i < end; ++i) out[i - begin] = v;
    return;
  }
  double std_dev = init_method_std;
  if (s.init == InitKind::kScaledNormal) std_dev /= std::sqrt(2.0 * static_cast<double>(d.layers));
  for (int64_t i = begin; i < end; ++i) {
    uint64_t e = static_cast<uint64_t>(full_index(s, d, i));
    out[i - begin] =
        static_cast<float>(std_dev * init_normal(seed, static_cast<uint64_t>(param_index), e));
  }
}

}  // namespace mplan::exec
