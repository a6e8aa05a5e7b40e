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

}  // namespace mplan
