// The executor's switches in the environment (MPLAN_*, docs/cli/run.md): a variable that is unset
// or empty takes the default; otherwise "0..." is off and anything else on.
#pragma once

#include <cstdlib>

namespace mplan::exec {

inline bool env_flag(const char* name, bool default_value = false) {
  const char* v = std::getenv(name);
  if (v == nullptr || v[0] == '\0') return default_value;
  return v[0] != '0';
}

}  // namespace mplan::exec
