// validate(plan): every broken rule of a plan, each naming the field it concerns, in a stable
// order (model, cluster, parallel, batch, schedule, training). An empty list means the plan can be
// simulated and run. require_valid() throws the first as an mplan::Error.
#pragma once

#include <string>
#include <vector>

#include "src/plan/plan.hpp"

namespace mplan {

struct Violation {
  std::string field;    // e.g. "parallel.tp"
  std::string message;  // the rule, e.g. "num_attention_heads (12) must be divisible by tp (8)"
  bool operator==(const Violation&) const = default;
};

std::vector<Violation> validate(const Plan& plan);
void require_valid(const Plan& plan);
std::string to_string(const Violation& v);  // "field: message"

// Transformer Engine's all-to-all context parallelism splits each tensor-parallel rank's heads
// (and query groups; MLA: heads) over the all-to-all group: true when `a2a` ranks can share them
// at tensor parallelism `tp` (validate()'s parallel.cp_comm_type rule).
bool cp_a2a_splits_heads(const ModelSpec& m, int64_t tp, int64_t a2a);

}  // namespace mplan
