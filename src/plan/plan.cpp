// Plan JSON adapter: schema_version check, then each section by its own adapter.
#include "src/plan/plan.hpp"

#include <iostream>

#include "src/common/embedded_configs.hpp"
#include "src/common/error.hpp"

namespace mplan {

int64_t Plan::num_nodes() const {
  return (world_size() + cluster.gpus_per_node - 1) / cluster.gpus_per_node;
}

Plan plan_from_json(const Json& j) {
  JsonObject o(j, "");
  int64_t version = o.get_int("schema_version", {INT64_MIN, INT64_MAX});
  if (version != kPlanSchemaVersion)
    throw Error(
        cat("schema_version: this mplan reads version ", kPlanSchemaVersion, ", got ", version));
  o.allow("description");
  Plan p;
  p.model = model_from_json(o.raw("model"), "model");
  p.cluster = cluster_from_json(o.raw("cluster"), "cluster");
  p.parallel = parallel_from_json(o.raw("parallel"), "parallel");
  p.training =
      o.has("training") ? training_from_json(o.raw("training"), "training") : TrainingConfig{};
  o.finish();
  return p;
}

Json plan_to_json(const Plan& p) {
  Json j;
  j["schema_version"] = kPlanSchemaVersion;
  j["model"] = model_to_json(p.model);
  j["cluster"] = cluster_to_json(p.cluster);
  j["parallel"] = parallel_to_json(p.parallel);
  j["training"] = training_to_json(p.training);
  return j;
}

Plan load_plan(const std::string& path) {
  const std::string name = path == "-" ? "standard input" : path;
  const std::string text =
      path == "-" ? read_bounded(std::cin, name) : read_text_file(path, "plan");
  const Json j = parse_json(text, name);  // its errors name the file
  try {
    return plan_from_json(j);
  } catch (const Error& e) {
    throw Error(cat(name, ": ", e.what()));
  }
}

}  // namespace mplan
