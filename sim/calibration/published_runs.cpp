// Rules for what the papers do not state, one set for all runs:
// - micro-batch size (SC'21): 1, as Megatron-LM's GPT-3 175B example script
//   (examples/gpt3/train_gpt3_175b_distributed.sh: --micro-batch-size 1);
// - interleaving (SC'21: "interleaved schedule ... for all Table-1 runs", degree not given): with
//   pp > 1, the smallest number of model chunks >= 2 that divides the layers per stage;
// - precision: bf16 parameters with fp32 main gradients (the papers' "mixed precision"; fp16 has
//   the same speed and, with fp32 main gradients, the same 18 bytes per parameter);
// - attention: materialized scores with Megatron's fused masked softmax (2021-22 Megatron-LM
//   had no flash attention); dropout 0.1 (Megatron's default);
// - data-parallel gradients all-reduced after the backward (Megatron-LM's default: no
//   --overlap-grad-reduce), no distributed optimizer (neither paper uses it);
// - "full (implied)" recompute: full, uniform, one layer per checkpoint (recompute_num_layers 1);
// - pipeline tensors with Megatron's 2021-22 scatter/gather (SC'21 §4.1, used for all Table-1
//   runs; the default of the Megatron-LM both papers ran), SimOptions::pipeline_scatter_gather.
#include "sim/calibration/published_runs.hpp"

#include <algorithm>
#include <cmath>

#include "src/common/error.hpp"
#include "src/plan/validate.hpp"

namespace mplan::sim {

namespace {

const Json& need(const Json& o, const char* key, const std::string& id) {
  if (!o.is_object() || !o.contains(key) || o.at(key).is_null())
    throw Error(cat("published run '", id, "': missing ", key));
  return o.at(key);
}
int64_t need_int(const Json& o, const char* key, const std::string& id) {
  const Json& v = need(o, key, id);
  if (!v.is_number_integer())
    throw Error(cat("published run '", id, "': ", key, " not an integer"));
  return v.get<int64_t>();
}

}  // namespace

std::vector<PublishedRun> published_runs(const Json& doc, const ClusterSpec& cluster) {
  if (!doc.is_object() || !doc.contains("runs") || !doc.at("runs").is_array())
    throw Error("published runs: no 'runs' array");
  std::vector<PublishedRun> out;
  for (const Json& r : doc.at("runs")) {
    PublishedRun run;
    run.id = need(r, "id", "?").get<std::string>();
    const std::string& id = run.id;
    run.source = cat(r.value("source_key", ""), " ", r.value("source_location", ""));
    const Json& m = need(r, "model", id);
    ModelSpec& model = run.plan.model;
    model.name = need(m, "name", id).get<std::string>();
    model.num_layers = need_int(m, "num_layers", id);
    model.hidden_size = need_int(m, "hidden_size", id);
    model.num_attention_heads = need_int(m, "num_attention_heads", id);
    model.num_query_groups = need_int(m, "num_query_groups", id);
    model.kv_channels = model.hidden_size / model.num_attention_heads;
    model.ffn_hidden_size = need_int(m, "ffn_hidden_size", id);
    model.vocab_size = need_int(m, "vocab_size", id);
    model.seq_length = need_int(m, "seq_length", id);
    model.max_position_embeddings = model.seq_length;
    model.activation = Activation::kGelu;
    model.normalization = Normalization::kLayerNorm;
    model.position_embedding = PositionEmbedding::kLearned;
    model.tied_embeddings = m.value("tied_embeddings", true);
    model.add_bias_linear = true;

    run.plan.cluster = cluster;
    run.plan.cluster.num_nodes = 0;
    TrainingConfig& t = run.plan.training;
    t.precision = Precision::kBf16;
    t.grads_in_fp32 = true;
    t.attention_backend = AttentionBackend::kUnfused;

    const Json& p = need(r, "parallel", id);
    ParallelConfig& par = run.plan.parallel;
    par.tp = need_int(p, "tp", id);
    par.pp = need_int(p, "pp", id);
    par.dp = need_int(p, "dp", id);
    par.cp = 1;
    par.ep = 1;
    par.etp = par.tp;
    par.sequence_parallel = p.value("sequence_parallel", false);
    par.global_batch_size = need_int(p, "global_batch_size", id);
    par.overlap_grad_reduce = false;
    par.overlap_param_gather = false;
    par.distributed_optimizer = false;
    std::vector<std::string> filled;
    if (p.contains("micro_batch_size") && p.at("micro_batch_size").is_number_integer()) {
      par.micro_batch_size = p.at("micro_batch_size").get<int64_t>();
    } else {
      par.micro_batch_size = 1;
      filled.push_back("micro_batch_size 1");
    }
    par.vpp = 1;
    const Json vpp = p.value("vpp", Json());
    if (vpp.is_number_integer()) {
      par.vpp = vpp.get<int64_t>();
    } else if (vpp.is_string() && par.pp > 1) {
      const int64_t per_stage = model.num_layers / par.pp;
      for (int64_t v = 2; v <= per_stage; ++v)
        if (per_stage % v == 0) {
          par.vpp = v;
          break;
        }
      filled.push_back(cat("vpp ", par.vpp));
    }
    par.schedule = par.vpp > 1 ? ScheduleKind::kInterleaved : ScheduleKind::k1F1B;
    const std::string rc = p.value("recompute", std::string("none"));
    if (rc.rfind("full", 0) == 0) {
      par.recompute = Recompute::kFull;
      par.recompute_method = RecomputeMethod::kUniform;
      par.recompute_num_layers = 1;
      if (rc != "full") filled.push_back("full recompute");
    } else if (rc.rfind("selective", 0) == 0) {
      par.recompute = Recompute::kSelective;
    } else {
      par.recompute = Recompute::kNone;
    }
    const Json& meas = r.value("measured", Json::object());
    const Json& der = r.value("derived", Json::object());
    if (meas.contains("iteration_time_s") && meas.at("iteration_time_s").is_number())
      run.published_time_s = meas.at("iteration_time_s").get<double>();
    else if (der.contains("iteration_time_s") && der.at("iteration_time_s").is_number())
      run.published_time_s = der.at("iteration_time_s").get<double>();
    else
      throw Error(cat("published run '", id, "': no measured or derived iteration_time_s"));
    for (size_t i = 0; i < filled.size(); ++i) run.filled += (i ? ", " : "") + filled[i];

    const std::vector<Violation> broken = validate(run.plan);
    if (!broken.empty()) throw Error(cat("published run '", id, "': ", to_string(broken.front())));
    out.push_back(std::move(run));
  }
  return out;
}

std::vector<CalibrationRow> simulate_published(const std::vector<PublishedRun>& runs) {
  std::vector<CalibrationRow> rows;
  for (const PublishedRun& run : runs) {
    CalibrationRow row;
    row.id = run.id;
    row.published_s = run.published_time_s;
    SimOptions o;
    o.pipeline_scatter_gather = true;
    row.result = simulate(run.plan, o);
    row.predicted_s = row.result.iteration_time_s;
    row.error = (row.predicted_s - row.published_s) / row.published_s;
    rows.push_back(std::move(row));
  }
  return rows;
}

double median_abs_error(const std::vector<CalibrationRow>& rows) {
  if (rows.empty()) return 0;
  std::vector<double> e;
  for (const CalibrationRow& r : rows) e.push_back(std::abs(r.error));
  std::sort(e.begin(), e.end());
  const size_t n = e.size();
  return n % 2 ? e[n / 2] : 0.5 * (e[n / 2 - 1] + e[n / 2]);
}

}  // namespace mplan::sim
