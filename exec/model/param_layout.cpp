// make_param_layout(): the rank's chunks, their tensors and buffers; init_param_shard():
// Megatron's init (normal(0, std) for weights and embeddings, std/sqrt(2L) for linear_proj and
// linear_fc2, zero biases, unit norm weights) evaluated only at this rank's elements.
#include "exec/model/param_layout.hpp"

#include <cmath>

#include "exec/model/init_rng.hpp"
#include "src/common/error.hpp"
#include "src/model/layer_range.hpp"
#include "src/parallel/grad_buckets.hpp"

namespace mplan::exec {

namespace {

ParamSpec spec_of(const ParamTensor& t, int chunk) {
  ParamSpec s;
  s.name = tensor_name(t);
  s.role = t.role;
  s.layer = t.layer;
  s.chunk = chunk;
  s.ndim = t.ndim;
  s.rows = t.rows;
  s.cols = t.cols;
  s.shard = t.shard;
  s.init = t.init;
  s.weight_decay = t.weight_decay;
  s.tp_duplicated = t.tp_duplicated;
  s.sp_grad_reduce = t.sp_grad_reduce;
  s.shared_embedding = t.shared_embedding;
  s.shared_copy = t.shared_copy;
  s.model_index = t.model_index;
  s.local_rows = t.local_rows;
  s.local_cols = t.local_cols;
  s.block_rows = t.block_rows;
  MPLAN_CHECK(t.copies == 1 && !t.expert, s.name, ": routed experts are not executable");
  return s;
}

// Records parameter `i` of the chunk under its role.
void note_role(ChunkParams& c, int i, const ParamSpec& s) {
  if (s.layer >= 0) {
    LayerParams& lp = c.layers[static_cast<size_t>(s.layer - c.first_layer)];
    switch (s.role) {
      case TensorRole::kInputNormWeight:
        lp.ln1_w = i;
        return;
      case TensorRole::kInputNormBias:
        lp.ln1_b = i;
        return;
      case TensorRole::kProjWeight:
        lp.proj_w = i;
        return;
      case TensorRole::kProjBias:
        lp.proj_b = i;
        return;
      case TensorRole::kQkvWeight:
        lp.qkv_w = i;
        return;
      case TensorRole::kQkvBias:
        lp.qkv_b = i;
        return;
      case TensorRole::kMlpNormWeight:
        lp.ln2_w = i;
        return;
      case TensorRole::kMlpNormBias:
        lp.ln2_b = i;
        return;
      case TensorRole::kFc1Weight:
        lp.fc1_w = i;
        return;
      case TensorRole::kFc1Bias:
        lp.fc1_b = i;
        return;
      case TensorRole::kFc2Weight:
        lp.fc2_w = i;
        return;
      case TensorRole::kFc2Bias:
        lp.fc2_b = i;
        return;
      default:
        break;
    }
    MPLAN_CHECK(false, s.name, ": not a tensor of the executor's GPT layer");
  }
  switch (s.role) {
    case TensorRole::kWordEmbedding:
      c.wte = i;
      return;
    case TensorRole::kPositionEmbedding:
      c.wpe = i;
      return;
    case TensorRole::kFinalNormWeight:
      c.lnf_w = i;
      return;
    case TensorRole::kFinalNormBias:
      c.lnf_b = i;
      return;
    case TensorRole::kOutputWeight:
      c.output = i;
      return;
    default:
      break;
  }
  MPLAN_CHECK(false, s.name, ": unexpected tensor");
}

}  // namespace

ParamLayout make_param_layout(const ModelSpec& m, const ParallelConfig& p, int64_t pp_rank,
                              int64_t bucket_elems_override) {
  ParamLayout out;
  const int64_t pad = grad_bucket_pad(p);
  std::vector<BucketItem> items;
  for (int64_t c = 0; c < p.vpp; ++c) {
    const int chunk = static_cast<int>(c);
    ChunkParams cp;
    const LayerRange range = chunk_layers(m.num_layers, p, pp_rank, c);
    cp.first_layer = range.first;
    cp.num_layers = range.count;
    cp.has_embedding = pp_rank == 0 && c == 0;
    cp.has_output = pp_rank == p.pp - 1 && c == p.vpp - 1;
    cp.layers.assign(static_cast<size_t>(range.count), LayerParams{});
    const int first = static_cast<int>(out.specs.size());
    for (const ParamTensor& t : chunk_tensors(m, p, pp_rank, c)) {
      const int i = static_cast<int>(out.specs.size());
      out.specs.push_back(spec_of(t, chunk));
      cp.params.push_back(i);
      note_role(cp, i, out.specs.back());
    }
    if (cp.has_output && cp.output < 0) cp.output = cp.wte;  // tied, pp = 1
    MPLAN_CHECK(cp.num_layers == 0 || cp.layers.back().fc2_b >= 0 || !m.add_bias_linear,
                "incomplete layer");

    // The chunk's buffer: parameters in reverse order, Megatron's buckets.
    items.clear();
    for (int i = static_cast<int>(out.specs.size()) - 1; i >= first; --i) {
      const ParamSpec& s = out.specs[static_cast<size_t>(i)];
      items.push_back({s.local_numel(), s.shared_embedding && p.distributed_optimizer});
    }
    int64_t bucket = grad_bucket_elems(p, pp_rank, c);
    if (bucket_elems_override != 0) bucket = bucket_elems_override > 0 ? bucket_elems_override : 0;
    const BucketLayout bl = layout_grad_buckets(items, bucket, kParamAlignElems, pad);
    cp.begin = out.total_elems;
    for (size_t k = 0; k < items.size(); ++k)
      out.specs[static_cast<size_t>(static_cast<int>(out.specs.size()) - 1 - static_cast<int>(k))]
          .offset = cp.begin + bl.item_offset[k];
    cp.bucket_begin = static_cast<int>(out.buckets.size());
    for (const BucketSpan& b : bl.buckets) {
      GradBucket g;
      g.chunk = chunk;
      g.offset = cp.begin + b.offset;
      g.numel = b.numel;
      for (int32_t k = b.first_item; k <= b.last_item; ++k)
        g.params.push_back(static_cast<int>(out.specs.size()) - 1 - k);
      out.buckets.push_back(std::move(g));
    }
    cp.bucket_end = static_cast<int>(out.buckets.size());
    // Chunks start aligned (a bucket may end on any multiple of pad).
    out.total_elems =
        (cp.begin + bl.total + kParamAlignElems - 1) / kParamAlignElems * kParamAlignElems;
    cp.end = out.total_elems;
    out.chunks.push_back(std::move(cp));
  }
  return out;
}

int64_t full_index(const ParamSpec& s, const GptDims& d, int64_t i) {
  int64_t r = i / s.local_cols, c = i % s.local_cols;
  switch (s.shard) {
    case ShardKind::kReplicated:
      return i;
    case ShardKind::kRows:
      return (d.tp_rank * s.local_rows + r) * s.cols + c;
    case ShardKind::kBlockRows: {
      // Block k holds full rows [start_k, start_k + R_k); this rank the r-th 1/tp of each.
      int64_t start = 0, local_start = 0;
      for (int64_t full : s.block_rows) {
        const int64_t local = full / d.tp;
        if (local > 0 && r < local_start + local)
          return (start + d.tp_rank * local + (r - local_start)) * s.cols + c;
        start += full;
        local_start += local;
      }
      return -1;
    }
    case ShardKind::kCols:
      return r * s.cols + d.tp_rank * s.local_cols + c;
  }
  return -1;
}

void init_param_shard(const ParamSpec& s, const GptDims& d, uint64_t seed, double init_method_std,
                      int64_t begin, int64_t end, float* out) {
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
        static_cast<float>(std_dev * init_normal(seed, static_cast<uint64_t>(s.model_index), e));
  }
}

}  // namespace mplan::exec
