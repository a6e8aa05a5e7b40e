// Megatron-LM's per-layer pattern arguments (--moe-layer-freq, --window-attn-skip-freq): an
// integer N, or a Python list expression such as "([0]*3+[1]*58)" or "([1]*3+[0])*2" (lists of
// integers, '+' concatenation, '*' repetition, parentheses), as arguments.py's moe_freq_type
// evaluates it. Invariant: format_layer_pattern's text parses back to the same list.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mplan {

// The list the expression `text` evaluates to (at most 65536 entries); an Error naming `flag`
// when it is not such an expression.
std::vector<int64_t> parse_layer_pattern(const std::string& text, const std::string& flag);

// True when `text` is a list expression (contains '['), as moe_freq_type decides.
bool is_layer_pattern(const std::string& text);

// Runs of equal entries as "([a]*n+[b]*m+...)" ("[a]" for a run of one).
std::string format_layer_pattern(const std::vector<int64_t>& pattern);

}  // namespace mplan
