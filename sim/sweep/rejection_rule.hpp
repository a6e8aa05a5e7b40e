// The rule a validate() violation states, without its numbers, so the sweep can count rejected
// candidates by rule: "parallel.tp: num_attention_heads (#) must be a multiple of
// tensor_model_parallel_size (#)." Invariant: two violations of one rule with different values
// give the same key; the key keeps the field and the rule's words.
#pragma once

#include <string>

#include "src/plan/validate.hpp"

namespace mplan::sweep {

// "field: message" with every run of digits (and a decimal fraction after it) replaced by '#'.
std::string rejection_rule(const Violation& v);

}  // namespace mplan::sweep
