// Output helpers: table rendering and number formatting for the human-readable outputs.
#include "cli/output.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>

#include "src/common/error.hpp"
#include "src/common/json_reader.hpp"
#include "src/common/units.hpp"

namespace mplan::cli {

namespace {
bool looks_numeric(const std::string& s) {
  if (s.empty()) return false;
  char c = s[0];
  return std::isdigit(static_cast<unsigned char>(c)) || ((c == '-' || c == '.') && s.size() > 1);
}
// Display width in terminal columns: counts UTF-8 code points, not bytes.
size_t display_width(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s)
    if ((c & 0xC0) != 0x80) ++n;
  return n;
}
}  // namespace

std::string Table::render(const std::string& indent) const {
  std::vector<size_t> w(header_.size(), 0);
  auto widen = [&](const std::vector<std::string>& r) {
    for (size_t i = 0; i < r.size() && i < w.size(); ++i)
      w[i] = std::max(w[i], display_width(r[i]));
  };
  widen(header_);
  for (const auto& r : rows_) widen(r);
  std::string out;
  auto emit = [&](const std::vector<std::string>& r, bool is_header) {
    std::string line = indent;
    for (size_t i = 0; i < w.size(); ++i) {
      std::string cell = i < r.size() ? r[i] : "";
      std::string pad(w[i] - display_width(cell), ' ');
      bool right = !is_header && looks_numeric(cell);
      line += right ? pad + cell : cell + pad;
      if (i + 1 < w.size()) line += "  ";
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  };
  emit(header_, true);
  for (const auto& r : rows_) emit(r, false);
  return out;
}

std::string format_fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string format_gib(int64_t bytes, int decimals) {
  return format_fixed(bytes_to_gib(static_cast<double>(bytes)), decimals) + " GiB";
}

std::string format_ms(double seconds, int decimals) {
  return format_fixed(seconds * 1e3, decimals) + " ms";
}

std::string format_duration(double seconds) {
  return seconds < 10 ? format_ms(seconds, 1) : format_fixed(seconds, 2) + " s";
}

std::string format_percent(double fraction, int decimals) {
  return format_fixed(fraction * 100.0, decimals) + " %";
}

void write_text_file(const std::string& path, const std::string& text, const std::string& flag) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(cat(flag, ": cannot write '", path, "'"));
  out << text;
  out.close();
  if (!out) throw Error(cat(flag, ": cannot write '", path, "'"));
}

Implementation stack_of(const std::string& value, const std::string& flag) {
  const std::optional<Implementation> impl = stack_from(value);
  if (!impl)
    throw Error(cat(flag, ": must be one of ", kStackNames, ", got ", json_excerpt(value)));
  return *impl;
}

void apply_stack(Plan& plan, Implementation impl) {
  plan.training.implementation = impl;
  if (impl == Implementation::kMegatronLocal)
    plan.training.attention_backend = AttentionBackend::kUnfused;
}

bool stderr_is_terminal() { return ::isatty(STDERR_FILENO) == 1; }
bool stdout_is_terminal() { return ::isatty(STDOUT_FILENO) == 1; }

}  // namespace mplan::cli
