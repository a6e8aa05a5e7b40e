// Output helpers shared by the subcommands: aligned text tables, human-readable sizes and times,
// writing result files (errors name the flag), and whether stderr is a terminal.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "src/plan/implementation.hpp"
#include "src/plan/plan.hpp"

namespace mplan::cli {

// A text table: columns padded to their widest cell; numeric-looking cells right-aligned.
class Table {
 public:
  explicit Table(std::vector<std::string> header) : header_(std::move(header)) {}
  void add_row(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  std::string render(const std::string& indent = "") const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

std::string format_gib(int64_t bytes, int decimals = 1);  // "12.3 GiB"
std::string format_ms(double seconds, int decimals = 1);  // "123.4 ms"
// A duration in the one style every command prints: milliseconds below 10 s ("503.4 ms"),
// seconds from there ("136.21 s").
std::string format_duration(double seconds);
std::string format_fixed(double v, int decimals);               // "0.52"
std::string format_percent(double fraction, int decimals = 1);  // "52.0 %"
// Writes `text` to `path`; throws mplan::Error "<flag>: cannot write '<path>'" on failure.
void write_text_file(const std::string& path, const std::string& text, const std::string& flag);
// The value of --stack: an implementation's name or "megatron" (megatron-te); anything else is an
// Error naming the flag and the accepted names.
Implementation stack_of(const std::string& value, const std::string& flag = "--stack");
// The plan as `impl` runs it: training.implementation set; Megatron-LM's local implementation has
// only materialized attention (its DotProductAttention), so its attention backend is unfused.
void apply_stack(Plan& plan, Implementation impl);
bool stderr_is_terminal();
bool stdout_is_terminal();

}  // namespace mplan::cli
