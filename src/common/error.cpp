// Out-of-line part of MPLAN_CHECK, so the macro expands to little code at each call site.
#include "src/common/error.hpp"

namespace mplan::detail {

void check_failed(const char* file, int line, const char* cond, const std::string& msg) {
  std::string what = cat(file, ":", line, ": internal check failed: ", cond);
  if (!msg.empty()) what += cat(" (", msg, ")");
  throw InternalError(what);
}

}  // namespace mplan::detail
