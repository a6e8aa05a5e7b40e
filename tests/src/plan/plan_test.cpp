// Tests of the plan file: parsing (unknown keys, wrong types, missing fields and impossible
// values each give an error naming the field), the parallel section's defaults, and
// plan_to_json / plan_from_json round trips.
#include "src/plan/plan.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>
#include <filesystem>
#include <fstream>

#include "src/common/embedded_configs.hpp"
#include "src/common/error.hpp"

namespace mplan {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

Json minimal() {
  return parse_json(R"({"schema_version": 1, "model": "gpt3-1.3b", "cluster": "h200x4",
    "parallel": {"dp": 4, "micro_batch_size": 4, "global_batch_size": 64}})",
                    "t");
}

std::string error_of(const Json& j) {
  try {
    plan_from_json(j);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Plan, ShippedPlanPreset) {
  Plan p = plan_from_json(parse_json(load_config_text("plans", "gpt3-1.3b-dp4", "plan"), "p"));
  EXPECT_EQ(p.model, load_model("gpt3-1.3b"));
  EXPECT_EQ(p.cluster, load_cluster("h200x4"));
  EXPECT_EQ(p.parallel.dp, 4);
  EXPECT_EQ(p.parallel.micro_batch_size, 4);
  EXPECT_EQ(p.parallel.global_batch_size, 64);
  EXPECT_EQ(p.training.precision, Precision::kBf16);
  EXPECT_EQ(p.world_size(), 4);
  EXPECT_EQ(p.num_nodes(), 1);
}

TEST(Plan, ParallelDefaultsFollowMegatron) {
  Plan p = plan_from_json(minimal());
  const ParallelConfig& q = p.parallel;
  EXPECT_EQ(q.tp, 1);
  EXPECT_EQ(q.cp, 1);
  EXPECT_EQ(q.ep, 1);
  EXPECT_EQ(q.pp, 1);
  EXPECT_EQ(q.vpp, 1);
  EXPECT_EQ(q.order, "tp-cp-ep-dp-pp");
  EXPECT_EQ(q.schedule, ScheduleKind::k1F1B);
  EXPECT_EQ(q.recompute, Recompute::kNone);
  EXPECT_FALSE(q.distributed_optimizer);
  EXPECT_FALSE(q.sequence_parallel);
  EXPECT_FALSE(q.decoder_first_pipeline_num_layers.has_value());
  Json j = minimal();
  j["parallel"]["tp"] = 2;
  j["parallel"]["pp"] = 2;
  j["parallel"]["vpp"] = 2;
  Plan r = plan_from_json(j);
  EXPECT_EQ(r.parallel.etp, 2);  // --expert-tensor-parallel-size defaults to tp
  EXPECT_EQ(r.parallel.schedule, ScheduleKind::kInterleaved);
  EXPECT_EQ(r.parallel.group_size_per_vp_stage(), 2);  // Megatron's default: pp
}

TEST(Plan, SchemaVersion) {
  Json j = minimal();
  j["schema_version"] = 2;
  EXPECT_EQ(error_of(j), "schema_version: this mplan reads version 1, got 2");
  j.erase("schema_version");
  EXPECT_EQ(error_of(j), "schema_version: missing (required)");
}

TEST(Plan, UnknownKeysNameTheField) {
  Json a = minimal();
  a["paralel"] = Json::object();
  EXPECT_THAT(error_of(a), StartsWith("paralel: unknown key"));
  Json b = minimal();
  b["parallel"]["pipeline"] = 2;
  EXPECT_THAT(error_of(b), StartsWith("parallel.pipeline: unknown key (known keys here: "));
  Json c = minimal();
  c["training"] = parse_json(R"({"precison": "bf16"})", "t");
  EXPECT_THAT(error_of(c), StartsWith("training.precison: unknown key"));
  Json d = minimal();
  d["cluster"] = cluster_to_json(load_cluster("h200x4"));
  d["cluster"]["gpu"]["tflops"] = 1;
  EXPECT_THAT(error_of(d), StartsWith("cluster.gpu.tflops: unknown key"));
}

TEST(Plan, WrongTypesNameTheField) {
  struct Case {
    const char* key;
    Json value;
    const char* message;
  };
  const Case cases[] = {
      {"tp", "2", "parallel.tp: must be an integer, got \"2\""},
      {"tp", 2.0, "parallel.tp: must be an integer, got 2.0"},
      {"sequence_parallel", 1, "parallel.sequence_parallel: must be true or false, got 1"},
      {"schedule", "1F1B",
       "parallel.schedule: must be one of gpipe, 1f1b, interleaved, zb-h1; "
       "got \"1F1B\""},
      {"recompute", "partial",
       "parallel.recompute: must be one of none, selective, full; got "
       "\"partial\""},
      {"order", 3, "parallel.order: must be a string, got 3"},
      {"recompute_method", "all",
       "parallel.recompute_method: must be one of uniform, block; got "
       "\"all\""},
  };
  for (const Case& c : cases) {
    Json j = minimal();
    j["parallel"][c.key] = c.value;
    EXPECT_EQ(error_of(j), c.message);
  }
  Json m = minimal();
  m["model"] = 7;
  EXPECT_EQ(error_of(m), "model: must be a JSON object, got 7");
  Json p = minimal();
  p["parallel"] = "tp2";
  EXPECT_EQ(error_of(p), "parallel: must be a JSON object, got \"tp2\"");
}

TEST(Plan, MissingFieldsNameTheField) {
  for (const char* key : {"model", "cluster", "parallel"}) {
    Json j = minimal();
    j.erase(key);
    EXPECT_EQ(error_of(j), cat(key, ": missing (required)"));
  }
  for (const char* key : {"dp", "micro_batch_size", "global_batch_size"}) {
    Json j = minimal();
    j["parallel"].erase(key);
    EXPECT_EQ(error_of(j), cat("parallel.", key, ": missing (required)"));
  }
  Json j = minimal();
  j["training"] = Json::object();  // every training field has a default
  EXPECT_EQ(error_of(j), "");
}

TEST(Plan, ImpossibleValuesNameTheField) {
  struct Case {
    const char* key;
    int value;
    const char* message;
  };
  const Case cases[] = {
      {"tp", 0, "parallel.tp: must be >= 1, got 0"},
      {"vpp", 0, "parallel.vpp: must be >= 1, got 0"},
      {"dp", -2, "parallel.dp: must be >= 1, got -2"},
      {"micro_batch_size", 0, "parallel.micro_batch_size: must be >= 1, got 0"},
      {"global_batch_size", 0, "parallel.global_batch_size: must be >= 1, got 0"},
      {"decoder_first_pipeline_num_layers", 0,
       "parallel.decoder_first_pipeline_num_layers: must be >= 1, got 0"},
      {"recompute_num_layers", 0, "parallel.recompute_num_layers: must be >= 1, got 0"},
  };
  for (const Case& c : cases) {
    Json j = minimal();
    j["parallel"][c.key] = c.value;
    EXPECT_EQ(error_of(j), c.message);
  }
}

// A plan with every field away from its default.
Plan everything() {
  Plan p;
  p.model = load_model("mixtral-8x7b");
  p.model.name = "custom-moe";
  p.model.moe->shared_expert_ffn_hidden_size = 2048;
  p.model.moe->layer_freq = 2;
  p.model.make_vocab_size_divisible_by = 64;
  p.cluster = load_cluster("dgx-h100");
  p.cluster.num_nodes = 16;
  ParallelConfig& q = p.parallel;
  q.tp = 2;
  q.cp = 2;
  q.ep = 4;
  q.etp = 1;
  q.pp = 4;
  q.vpp = 2;
  q.dp = 4;
  q.sequence_parallel = true;
  q.order = "tp-cp-ep-pp-dp";
  q.micro_batch_size = 2;
  q.global_batch_size = 256;
  q.schedule = ScheduleKind::kInterleaved;
  q.microbatch_group_size_per_vp_stage = 8;
  q.recompute = Recompute::kFull;
  q.recompute_method = RecomputeMethod::kBlock;
  q.recompute_num_layers = 2;
  q.distributed_optimizer = true;
  q.overlap_grad_reduce = false;
  q.overlap_param_gather = false;
  q.decoder_first_pipeline_num_layers = 6;
  q.decoder_last_pipeline_num_layers = 10;
  TrainingConfig& t = p.training;
  t.precision = Precision::kFp16;
  t.grads_in_fp32 = false;
  t.attention_backend = AttentionBackend::kUnfused;
  t.lr = 3e-4;
  t.weight_decay = 0.05;
  t.adam_beta1 = 0.8;
  t.adam_beta2 = 0.99;
  t.adam_eps = 1e-6;
  t.clip_grad = 0.5;
  t.init_method_std = 0.006;
  t.seed = 7;
  t.rampup_batch_size = RampupBatchSize{32, 32, 100000};
  return p;
}

TEST(Plan, JsonRoundTrip) {
  Plan p = everything();
  EXPECT_EQ(plan_from_json(plan_to_json(p)), p);
  // Through text, as a file would be written and read.
  EXPECT_EQ(plan_from_json(parse_json(plan_to_json(p).dump(2), "t")), p);
  Plan m = plan_from_json(minimal());
  EXPECT_EQ(plan_from_json(plan_to_json(m)), m);
  Plan it = m;
  it.training.train_iters = 500;
  EXPECT_EQ(plan_from_json(plan_to_json(it)), it);
}

TEST(Plan, WrittenPlanInlinesModelAndCluster) {
  Json j = plan_to_json(plan_from_json(minimal()));
  EXPECT_EQ(j["schema_version"], 1);
  EXPECT_TRUE(j["model"].is_object());
  EXPECT_EQ(j["model"]["name"], "gpt3-1.3b");
  EXPECT_TRUE(j["cluster"].is_object());
  EXPECT_EQ(j["parallel"]["dp"], 4);
}

TEST(Plan, NodesRoundUp) {
  Plan p = plan_from_json(minimal());
  p.cluster.gpus_per_node = 8;
  p.parallel.dp = 12;
  EXPECT_EQ(p.num_nodes(), 2);
  p.parallel.dp = 16;
  EXPECT_EQ(p.num_nodes(), 2);
  p.parallel.dp = 3;
  EXPECT_EQ(p.num_nodes(), 1);
}

class PlanFile : public ::testing::Test {
 protected:
  std::filesystem::path dir_ =
      std::filesystem::temp_directory_path() / ("mplan_plan_test_" + std::to_string(::getpid()));
  void SetUp() override { std::filesystem::create_directories(dir_); }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    std::string path = (dir_ / name).string();
    std::ofstream(path) << text;
    return path;
  }
};

TEST_F(PlanFile, LoadPlanNamesTheFileAndField) {
  std::string good = write("good.json", minimal().dump());
  EXPECT_EQ(load_plan(good).parallel.dp, 4);
  Json bad = minimal();
  bad["parallel"]["tp"] = 0;
  std::string path = write("bad.json", bad.dump());
  try {
    load_plan(path);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), path + ": parallel.tp: must be >= 1, got 0");
  }
  std::string broken = write("broken.json", "{\"schema_version\": 1,");
  EXPECT_THAT([&] { load_plan(broken); },
              ::testing::ThrowsMessage<Error>(HasSubstr("invalid JSON")));
  EXPECT_THAT([&] { load_plan((dir_ / "missing.json").string()); },
              ::testing::ThrowsMessage<Error>(HasSubstr("cannot read file")));
}

TEST_F(PlanFile, ModelAndClusterFromFiles) {
  std::string model = write("m.json", model_to_json(load_model("llama3-8b")).dump());
  Json j = minimal();
  j["model"] = model;
  EXPECT_EQ(plan_from_json(j).model, load_model("llama3-8b"));
}

}  // namespace
}  // namespace mplan
