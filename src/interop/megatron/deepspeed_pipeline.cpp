// GPTModelPipe's spec lists (megatron/model/gpt_model.py) and DeepSpeed's _partition_layers
// (deepspeed/runtime/pipe/module.py) over them. A "type:" regex is matched the way
// _find_layer_type matches it (Python's regex module, IGNORECASE, search anywhere in the name);
// here with std::regex, so only the syntax on which the two agree is taken.
#include "src/interop/megatron/deepspeed_pipeline.hpp"

#include <algorithm>
#include <cctype>
#include <regex>

#include "src/common/error.hpp"
#include "src/interop/megatron/deepspeed_partition.hpp"
#include "src/model/tensor_layout.hpp"

namespace mplan {
namespace {

int64_t sum_local(const std::vector<ParamTensor>& v) {
  int64_t n = 0;
  for (const ParamTensor& t : v) n += t.local_numel();
  return n;
}

// Whether tp divides what a rank's layer shards (else its per-rank counts are not whole; the
// plan then breaks validate()'s rules, reported by import).
bool shardable(const ModelSpec& m, const ParallelConfig& p) {
  const bool dense = m.num_moe_layers() < m.num_layers;
  return m.num_query_groups % p.tp == 0 && (!dense || m.ffn_hidden_size % p.tp == 0);
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Letters, digits, '_', alternation, '.', quantifiers * + ?, anchors, plain groups and bracket
// classes: Python's regex and ECMAScript read these alike. Escapes, braces and "(?" do not all
// agree, so they are refused rather than guessed.
bool portable_regex(const std::string& r) {
  if (r.find("(?") != std::string::npos) return false;
  return std::all_of(r.begin(), r.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 ||
           std::string_view("_|.*+?^$()[]-").find(c) != std::string_view::npos;
  });
}

std::string spec_names(const std::vector<DsLayerSpec>& specs) {
  std::vector<std::string> seen;
  for (const DsLayerSpec& s : specs)
    if (std::find(seen.begin(), seen.end(), s.name) == seen.end()) seen.push_back(s.name);
  std::string out;
  for (const std::string& n : seen) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// _find_layer_type: 1 for each spec whose name the regex finds, 0 for the others.
std::vector<int64_t> type_weights(const std::vector<DsLayerSpec>& specs, const std::string& regex,
                                  const std::string& method) {
  if (!portable_regex(regex))
    throw Error(cat(kPpPartitionMethodFlag, " '", method, "': the regex '", regex,
                    "' uses syntax mplan does not reproduce (it takes letters, digits, _ | . * + "
                    "? ^ $ ( ) [ ] -)"));
  std::regex re;
  try {
    re = std::regex(regex, std::regex::ECMAScript | std::regex::icase);
  } catch (const std::regex_error&) {
    throw Error(cat(kPpPartitionMethodFlag, " '", method, "': '", regex, "' is not a regex"));
  }
  std::vector<int64_t> w(specs.size(), 0);
  bool any = false;
  for (size_t i = 0; i < specs.size(); ++i)
    if (std::regex_search(specs[i].name, re)) w[i] = 1, any = true;
  if (!any)
    throw Error(cat(kPpPartitionMethodFlag, " '", method,
                    "': DeepSpeed finds no layer to partition ",
                    "(no layer of GPTModelPipe is named by '", regex,
                    "'; its layers: ", spec_names(specs), ")"));
  return w;
}

}  // namespace

std::vector<DsLayerSpec> gpt_model_pipe_specs(const ModelSpec& m, const ParallelConfig& p,
                                              const DsModelOptions& o) {
  const bool bigscience = o.fork == MegatronDeepSpeedFork::kBigScience;
  const int64_t h = m.hidden_size;
  const int64_t embedding = sum_local(embedding_tensors(m, p)) + (o.embed_layernorm ? 2 * h : 0);
  int64_t final_norm = 0;
  for (const ParamTensor& t : output_tensors(m, p))
    if (t.role == TensorRole::kFinalNormWeight || t.role == TensorRole::kFinalNormBias)
      final_norm += t.local_numel();
  // -1: not counted (tp does not divide the layer); the "parameters" method refuses it.
  const bool whole = shardable(m, p);
  const LayerShard none{-1, 0, 0, 0};
  const LayerShard dense =
      whole && m.num_moe_layers() < m.num_layers ? layer_shard(m, p, false) : none;
  const LayerShard moe = whole && m.moe ? layer_shard(m, p, true) : none;

  std::vector<DsLayerSpec> s;
  s.push_back({"_to_float16", DsSpecKind::kFunction, 0});
  s.push_back({"EmbeddingPipe", DsSpecKind::kEmbedding, embedding});
  if (bigscience) s.push_back({"<lambda>", DsSpecKind::kFunction, 0});  // transpose to (s, b, h)
  for (int64_t l = 0; l < m.num_layers; ++l) {
    const LayerShard& ls = m.is_moe_layer(l) ? moe : dense;
    s.push_back({"ParallelTransformerLayerPipe", DsSpecKind::kTransformer, ls.dense + ls.expert});
  }
  if (!bigscience && m.moe && m.moe->num_experts > 1)
    s.push_back({"_calculate_moe_loss", DsSpecKind::kFunction, 0});
  if (bigscience) s.push_back({"undo", DsSpecKind::kFunction, 0});  // transpose back
  const bool rms = !bigscience && m.normalization == Normalization::kRmsNorm;
  s.push_back(
      {rms ? "MixedFusedRMSNorm" : "MixedFusedLayerNorm", DsSpecKind::kFinalNorm, final_norm});
  if (m.tied_embeddings)  // the tied EmbeddingPipe again, computing the logits
    s.push_back({"EmbeddingPipe", DsSpecKind::kOutput, embedding});
  else
    s.push_back({"LMHeadPipe", DsSpecKind::kOutput, m.padded_vocab_size(p.tp) / p.tp * h});
  if (o.half_precision) s.push_back({"float16_to_fp32", DsSpecKind::kFunction, 0});
  return s;
}

std::vector<int64_t> deepspeed_stage_boundaries(const std::vector<DsLayerSpec>& specs,
                                                const std::string& method, int64_t num_stages) {
  const std::string lowered = lower(method);
  if (lowered == "uniform")
    return partition_uniform(static_cast<int64_t>(specs.size()), num_stages);
  if (lowered == "parameters") {
    std::vector<int64_t> w;
    for (const DsLayerSpec& s : specs) {
      if (s.params < 0)
        throw Error(cat(kPpPartitionMethodFlag, " ", method,
                        ": weighs each layer by its parameters on one tensor-parallel rank, "
                        "which needs --tensor-model-parallel-size to divide the query groups "
                        "and the MLP width"));
      w.push_back(s.params);
    }
    return partition_balanced(w, num_stages);
  }
  if (lowered.starts_with("type:")) {
    // method.split(':')[1]: up to the next colon, if any.
    std::string regex = lowered.substr(5);
    regex = regex.substr(0, regex.find(':'));
    return partition_balanced(type_weights(specs, regex, method), num_stages);
  }
  throw Error(cat(kPpPartitionMethodFlag, " '", method,
                  "': DeepSpeed's PipelineModule implements uniform, parameters and "
                  "type:REGEX"));
}

PipelineLayout deepspeed_layout(const std::vector<DsLayerSpec>& specs,
                                const std::vector<int64_t>& parts, const std::string& method) {
  const auto stages = static_cast<int64_t>(parts.size()) - 1;
  MPLAN_CHECK(
      stages >= 1 && parts.front() == 0 && parts.back() == static_cast<int64_t>(specs.size()),
      "stage boundaries do not cover the specs");
  std::vector<int64_t> decoder(static_cast<size_t>(stages), 0);
  for (int64_t st = 0; st < stages; ++st) {
    for (int64_t i = parts[static_cast<size_t>(st)]; i < parts[static_cast<size_t>(st + 1)]; ++i) {
      const DsLayerSpec& s = specs[static_cast<size_t>(i)];
      if (s.kind == DsSpecKind::kTransformer) ++decoder[static_cast<size_t>(st)];
      const bool misplaced = (s.kind == DsSpecKind::kEmbedding && st != 0) ||
                             (s.kind == DsSpecKind::kOutput && st != stages - 1);
      if (misplaced)
        throw Error(cat(kPpPartitionMethodFlag, " '", method, "': DeepSpeed puts the ",
                        s.kind == DsSpecKind::kEmbedding ? "embedding" : "output layer",
                        " on pipeline stage ", st, " of ", stages, " (layer specs ",
                        parts[static_cast<size_t>(st)], "..",
                        parts[static_cast<size_t>(st + 1)] - 1, " of ", specs.size(),
                        "); a Megatron-LM layout keeps it on the ",
                        s.kind == DsSpecKind::kEmbedding ? "first" : "last", " stage"));
    }
  }
  return layout_from_counts(decoder);
}

}  // namespace mplan
