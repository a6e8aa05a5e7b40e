// The rules of the model variants (MoE dispatch and overlap, multi-latent attention, multi-token
// prediction) that involve the parallel layout, as Megatron-LM's TransformerConfig states them,
// each a Violation naming its field. Invariant: adds nothing for a model without these variants.
#pragma once

#include <vector>

#include "src/plan/plan.hpp"
#include "src/plan/validate.hpp"

namespace mplan {

void append_variant_violations(const Plan& plan, std::vector<Violation>& out);

}  // namespace mplan
