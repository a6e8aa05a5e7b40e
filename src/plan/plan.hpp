// Plan: one training job = model + cluster + parallel layout + training settings. Every command
// reads or writes this document (schema_version 1). Parsing checks each field's type and range;
// rules across fields (divisibility, sizes) are validate()'s job (src/plan/validate.hpp).
#pragma once

#include <string>

#include "src/common/json_reader.hpp"
#include "src/model/model_spec.hpp"
#include "src/parallel/parallel_config.hpp"
#include "src/plan/cluster_spec.hpp"
#include "src/plan/training_config.hpp"

namespace mplan {

inline constexpr int kPlanSchemaVersion = 1;

struct Plan {
  ModelSpec model;
  ClusterSpec cluster;
  ParallelConfig parallel;
  TrainingConfig training;
  bool operator==(const Plan&) const = default;

  int64_t world_size() const { return parallel.world_size(); }
  // Nodes the plan occupies: ceil(world / gpus_per_node).
  int64_t num_nodes() const;
};

Plan plan_from_json(const Json& j);
// Writes the plan with model and cluster inlined, so the file stands alone.
Json plan_to_json(const Plan& p);
// Reads and parses a plan file; errors name the file and field. "-" reads standard input.
Plan load_plan(const std::string& path);

}  // namespace mplan
