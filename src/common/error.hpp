// Errors in two of the three tiers of the design: user input and broken invariants.
// Error: bad user input; its message is one line naming the flag or field and the rule it breaks
// (the CLI prints it and exits 2). InternalError: a broken invariant, raised by MPLAN_CHECK with
// file:line, always on (never compiled out); the CLI prints it and exits 3.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace mplan {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

class InternalError : public std::logic_error {
 public:
  explicit InternalError(const std::string& what) : std::logic_error(what) {}
};

namespace detail {
[[noreturn]] void check_failed(const char* file, int line, const char* cond, const std::string& msg);

// Joins any streamable values into one string: cat("tp=", 2) == "tp=2".
template <class... Args>
std::string cat(const Args&... args) {
  std::ostringstream os;
  if constexpr (sizeof...(Args) > 0) (os << ... << args);  // MPLAN_CHECK(cond) has no message
  return os.str();
}
}  // namespace detail

using detail::cat;

}  // namespace mplan

// Always-on invariant check: MPLAN_CHECK(x > 0, "x=", x) throws InternalError "file:line: ...".
#define MPLAN_CHECK(cond, ...)                                                             \
  do {                                                                                     \
    if (!(cond)) ::mplan::detail::check_failed(__FILE__, __LINE__, #cond, ::mplan::cat(__VA_ARGS__)); \
  } while (0)
