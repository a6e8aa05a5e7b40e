// MegatronArgList: pretrain_gpt.py's arguments as a launch script passes them, read with
// argparse's semantics (the last occurrence wins, a repeat with another value is reported) and
// typed getters that name the argument in every error. Invariant: an argument a getter asked
// for is "used"; leftovers() returns the others, each once, with its last values.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "src/interop/megatron/shell_script.hpp"

namespace mplan {

// One occurrence of an argument on the command line, with the words after it.
struct ArgOccurrence {
  std::string name;
  std::vector<ShellField> values;
};

// The words a launch passes to pretrain_gpt.py as argument occurrences: "--name" or
// "--name=value" starts one, other words are its values. Throws Error on a value before any
// argument; a leading word that depends on an unknown is skipped with a warning.
std::vector<ArgOccurrence> split_arguments(const std::vector<ShellField>& words,
                                           std::vector<std::string>& warnings);

// "$1, $HOME": what values depend on, for messages.
std::string join_unknown(const std::vector<std::string>& unknown);
// How to give a value for what a field depends on: "give it with --var 1=VALUE", or "give the
// value in the script".
std::string how_to_set(const std::vector<std::string>& unknown);

class MegatronArgList {
 public:
  // Warnings (repeated arguments now, unresolved values later) are appended to `warnings`.
  MegatronArgList(std::vector<ArgOccurrence> list, std::vector<std::string>& warnings);

  // The values of an occurrence as one text, space-separated.
  static std::string text_of(const std::vector<ShellField>& values);

  bool has(std::string_view name) const { return last_.count(name) > 0; }
  // The last occurrence of `name` (marked used), or nullptr.
  const ArgOccurrence* get(std::string_view name);
  // A flag (store_true): present, and takes no value; throws Error "<name>: takes no value".
  bool flag(std::string_view name);
  // The single value of `name`, or nullopt when absent. A value that depends on something
  // without a value here: an error when the argument shapes the plan (`layout`), otherwise a
  // warning and nullopt (the caller uses its default).
  std::optional<std::string> value(std::string_view name, bool layout);
  // The value as an integer >= min / a finite number >= min; Error naming `name` otherwise.
  std::optional<int64_t> int_value(std::string_view name, int64_t min, bool layout);
  std::optional<double> double_value(std::string_view name, double min, bool layout);

  // Arguments no getter asked for, in order of first appearance, with their last values.
  struct Leftover {
    std::string name;
    std::string text;  // "--name value ..."
  };
  std::vector<Leftover> leftovers() const;

  // "$1 (no value here): --save, --load" for each unknown a value depends on; positional
  // arguments first, by number, then the rest in order of use.
  std::vector<std::string> undefined_report() const;

 private:
  std::vector<ArgOccurrence> list_;
  std::map<std::string, size_t, std::less<>> last_;
  std::set<std::string, std::less<>> used_;
  std::vector<std::string>& warnings_;
};

}  // namespace mplan
