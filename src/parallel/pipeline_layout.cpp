// Megatron-LM's pipeline layout strings:
// megatron/core/transformer/pipeline_parallel_layer_layout.py (parse_str_to_list, __init__,
// validate_layer_layout) and the layout rules of megatron/training/arguments.py. The two unrolling
// passes reproduce re.sub over the patterns r'\(([^)]+)\)\*(\d+)' and r'(.)\*(\d+)': leftmost match
// first, non-overlapping, one pass each.
#include "src/parallel/pipeline_layout.hpp"

#include <algorithm>
#include <cctype>

#include "src/common/error.hpp"

namespace mplan {

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// The repeat count of a match: the digits from `pos` (at least one). Saturates beyond the
// longest layout, which the caller then refuses.
int64_t read_count(const std::string& s, size_t& pos) {
  int64_t n = 0;
  while (pos < s.size() && is_digit(s[pos])) {
    n = std::min<int64_t>(n * 10 + (s[pos] - '0'), kMaxLayoutChars + 1);
    ++pos;
  }
  return n;
}

void append_repeated(std::string& out, const std::string& piece, int64_t n,
                     const std::string& field) {
  const auto len = static_cast<int64_t>(piece.size());
  if (len > 0 && n > (kMaxLayoutChars - static_cast<int64_t>(out.size())) / len)
    throw Error(cat(field, ": the layout unrolls to more than ", kMaxLayoutChars, " characters"));
  for (int64_t i = 0; i < n; ++i) out += piece;
}

// re.sub(r'\(([^)]+)\)\*(\d+)', group(1) * n): "(" then one or more characters that are not
// ")" up to the first ")", then "*" and digits.
std::string unroll_groups(const std::string& s, const std::string& field) {
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    if (s[i] == '(') {
      const size_t close = s.find(')', i + 1);
      if (close != std::string::npos && close > i + 1 && close + 2 < s.size() &&
          s[close + 1] == '*' && is_digit(s[close + 2])) {
        size_t pos = close + 2;
        const int64_t n = read_count(s, pos);
        append_repeated(out, s.substr(i + 1, close - i - 1), n, field);
        i = pos;
        continue;
      }
    }
    out += s[i++];
  }
  return out;
}

// re.sub(r'(.)\*(\d+)', group(1) * n): any character but a newline, "*", digits.
std::string unroll_chars(const std::string& s, const std::string& field) {
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    if (s[i] != '\n' && i + 2 < s.size() && s[i + 1] == '*' && is_digit(s[i + 2])) {
      size_t pos = i + 2;
      const int64_t n = read_count(s, pos);
      append_repeated(out, std::string(1, s[i]), n, field);
      i = pos;
      continue;
    }
    out += s[i++];
  }
  return out;
}

}  // namespace

int64_t PipelineLayout::count(int32_t LayoutStage::*kind) const {
  int64_t n = 0;
  for (const LayoutStage& s : stages) n += s.*kind;
  return n;
}

PipelineLayout parse_pipeline_layout(const std::string& text, const std::string& field) {
  if (static_cast<int64_t>(text.size()) > kMaxLayoutChars)
    throw Error(cat(field, ": the layout is longer than ", kMaxLayoutChars, " characters"));
  std::string s;
  for (char c : text)
    if (c != ',') s += c;  // "remove purely cosmetic commas"
  s = unroll_chars(unroll_groups(s, field), field);

  PipelineLayout l;
  l.text = text;
  l.stages.emplace_back();
  bool seen_mtp = false;
  for (char c : s) {
    LayoutStage& st = l.stages.back();
    switch (c) {
      case '|':
        l.stages.emplace_back();
        continue;
      case 'E':
        ++st.embedding;
        break;
      case 't':
        ++st.decoder;
        l.decoder_after_mtp = l.decoder_after_mtp || seen_mtp;
        break;
      case 'm':
        ++st.mtp;
        seen_mtp = true;
        break;
      case 'L':
        ++st.loss;
        break;
      default: {
        const bool printable = std::isprint(static_cast<unsigned char>(c)) != 0;
        throw Error(
            cat(field, ": invalid layer character ",
                printable ? cat("'", c, "'") : cat("byte ", int(static_cast<unsigned char>(c))),
                " in \"", text, "\"; known layer characters: E, L, t, m (and | ( ) * n ,)"));
      }
    }
    if (l.first_layer == 0) l.first_layer = c;
    l.last_layer = c;
  }
  l.decoder_before.reserve(l.stages.size());
  int64_t before = 0;
  for (const LayoutStage& st : l.stages) {
    l.decoder_before.push_back(before);
    before += st.decoder;
  }
  return l;
}

namespace {

std::string stage_text(int64_t decoder, bool first, bool last) {
  std::string s = first ? "E" : "";
  if (decoder == 1) s += "t";
  if (decoder > 1) s += cat("t*", decoder);
  if (last) s += "L";
  return s;
}

}  // namespace

PipelineLayout layout_from_counts(const std::vector<int64_t>& decoder_per_stage) {
  MPLAN_CHECK(!decoder_per_stage.empty(), "a layout needs a stage");
  const size_t n = decoder_per_stage.size();
  std::vector<std::string> texts;
  texts.reserve(n);
  for (size_t i = 0; i < n; ++i)
    texts.push_back(stage_text(decoder_per_stage[i], i == 0, i + 1 == n));
  std::string out;
  for (size_t i = 0; i < n;) {
    size_t j = i + 1;
    while (j + 1 < n && texts[j] == texts[i]) ++j;  // a run; the last stage never joins one
    const size_t run = j - i;
    if (run >= 2)
      out += cat("(", texts[i], "|)*", run);
    else
      out += texts[i] + (i + 1 < n ? "|" : "");
    i = j;
  }
  return parse_pipeline_layout(out, "pipeline_model_parallel_layout");
}

std::optional<std::string> pipeline_layout_problem(const PipelineLayout& l, int64_t pp, int64_t vpp,
                                                   int64_t num_layers, int64_t mtp_num_layers) {
  const int64_t stages = l.num_stages();
  if (pp < 1 || stages % pp != 0)
    return cat(
        "The length of pipeline_model_parallel_layout must be divisible by "
        "pipeline_model_parallel_size (num_stages=",
        stages, ", pipeline_model_parallel_size=", pp, ")");
  if (stages / pp != vpp)
    return cat(
        "virtual_pipeline_model_parallel_size conflicts with pipeline_model_parallel_layout "
        "(virtual_pipeline_model_parallel_size=",
        vpp, ", detected_vpp_size=", stages / pp, ")");
  if (l.first_layer != 'E')
    return cat("The first layer must be embedding, but got ",
               l.first_layer ? cat("'", l.first_layer, "'") : std::string("no layer"));
  if (l.last_layer != 'L') return cat("The last layer must be loss, but got '", l.last_layer, "'");
  if (l.count(&LayoutStage::embedding) != 1) return "Embedding must be specified exactly once";
  if (l.count(&LayoutStage::loss) != 1) return "Loss must be specified exactly once";
  if (l.count(&LayoutStage::decoder) != num_layers)
    return cat("Number of decoder layers ", l.count(&LayoutStage::decoder),
               " must match num_layers ", num_layers);
  if (l.count(&LayoutStage::mtp) != mtp_num_layers)
    return cat("Number of mtp layers in layout (", l.count(&LayoutStage::mtp),
               ") must match mtp_num_layers (", mtp_num_layers, ")");
  if (l.decoder_after_mtp) return "decoder layers must be placed before MTP layers";
  for (int64_t i = 0; i < stages; ++i) {
    const int32_t mtp = l.stages[static_cast<size_t>(i)].mtp;
    if (mtp == 0) continue;
    if (i / pp != vpp - 1)
      return cat(
          "Currently we restrict that the MTP should be always in the last virtual "
          "pipeline stage of that rank (stage ",
          i, " is virtual stage ", i / pp, " of pipeline rank ", i % pp, ")");
    if (mtp != mtp_num_layers)
      return "All of the MTP layers must be in the same one virtual pipeline stage";
  }
  return std::nullopt;
}

}  // namespace mplan
