// Gpt2BpeTokenizer: pre-tokenization by hand, byte-to-unicode mapping, rank-ordered merges.
#include "exec/data/gpt2_bpe_tokenizer.hpp"

#include <limits>

#include "exec/data/unicode_classes.hpp"
#include "src/common/embedded_configs.hpp"
#include "src/common/error.hpp"
#include "src/common/json_reader.hpp"

namespace mplan::exec {

struct Gpt2BpeTokenizer::Model {
  std::vector<std::string> id_to_token;  // token strings (UTF-8 of byte-unicode characters)
  int32_t byte_id[256] = {};
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges;  // (a, b) -> (rank, merged)
  int32_t eod = -1;
  int32_t byte_of[324];  // byte-unicode code point (< 324) -> byte
};

namespace {

enum class CharClass { kSpace, kLetter, kNumber, kOther };

// One UTF-8 character at text[i]: its code point and length (an invalid byte: U+FFFD, length 1).
std::pair<char32_t, size_t> decode_utf8(std::string_view text, size_t i) {
  const auto b0 = static_cast<unsigned char>(text[i]);
  if (b0 < 0x80) return {b0, 1};
  size_t len = b0 >= 0xF0 && b0 < 0xF5 ? 4 : b0 >= 0xE0 ? 3 : b0 >= 0xC2 && b0 < 0xE0 ? 2 : 0;
  if (len == 0 || i + len > text.size()) return {0xFFFD, 1};
  char32_t cp = len == 2 ? b0 & 0x1F : len == 3 ? b0 & 0x0F : b0 & 0x07;
  for (size_t k = 1; k < len; ++k) {
    const auto b = static_cast<unsigned char>(text[i + k]);
    if ((b & 0xC0) != 0x80) return {0xFFFD, 1};
    cp = (cp << 6) | (b & 0x3F);
  }
  if ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
      (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
    return {0xFFFD, 1};
  return {cp, len};
}

CharClass classify(char32_t c) {
  if (is_unicode_space(c)) return CharClass::kSpace;
  if (is_unicode_letter(c)) return CharClass::kLetter;
  if (is_unicode_number(c)) return CharClass::kNumber;
  return CharClass::kOther;
}

void append_utf8(std::string& s, char32_t c) {
  if (c < 0x80) {
    s.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    s.push_back(static_cast<char>(0xC0 | (c >> 6)));
    s.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    s.push_back(static_cast<char>(0xE0 | (c >> 12)));
    s.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    s.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

}  // namespace

char32_t gpt2_byte_to_unicode(uint8_t b) {
  // Printable bytes stand for themselves; the others take 256, 257, ... in byte order.
  auto printable = [](int x) {
    return (x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE && x <= 0xFF);
  };
  if (printable(b)) return b;
  int n = 0;
  for (int x = 0; x < b; ++x) n += printable(x) ? 0 : 1;
  return static_cast<char32_t>(256 + n);
}

std::vector<std::pair<size_t, size_t>> gpt2_pretokenize(std::string_view text) {
  // Code points with their byte offsets and classes.
  std::vector<char32_t> cp;
  std::vector<size_t> at;
  std::vector<CharClass> cls;
  for (size_t i = 0; i < text.size();) {
    const auto [c, len] = decode_utf8(text, i);
    cp.push_back(c);
    at.push_back(i);
    cls.push_back(classify(c));
    i += len;
  }
  const size_t n = cp.size();
  at.push_back(text.size());
  std::vector<std::pair<size_t, size_t>> pieces;
  size_t i = 0;
  auto emit = [&](size_t end) {
    pieces.emplace_back(at[i], at[end]);
    i = end;
  };
  while (i < n) {
    const char32_t c = cp[i];
    // 's|'t|'re|'ve|'m|'ll|'d
    if (c == '\'' && i + 1 < n) {
      const char32_t a = cp[i + 1], b = i + 2 < n ? cp[i + 2] : 0;
      if (a == 's' || a == 't' || a == 'm' || a == 'd') {
        emit(i + 2);
        continue;
      }
      if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) {
        emit(i + 3);
        continue;
      }
    }
    // ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+': an optional space, then a run of one class.
    size_t j = i;
    if (c == ' ' && i + 1 < n && cls[i + 1] != CharClass::kSpace) ++j;
    if (cls[j] != CharClass::kSpace) {
      const CharClass k = cls[j];
      while (j < n && cls[j] == k) ++j;
      emit(j);
      continue;
    }
    // '\s+(?!\S)' then '\s+': a whitespace run, less its last character when a non-space
    // follows and the run is longer than one.
    while (j < n && cls[j] == CharClass::kSpace) ++j;
    emit(j < n && j - i >= 2 ? j - 1 : j);
  }
  return pieces;
}

Gpt2BpeTokenizer Gpt2BpeTokenizer::from_files(const std::string& vocab_file,
                                              const std::string& merge_file) {
  return from_text(read_text_file(vocab_file, "--vocab-file"),
                   read_text_file(merge_file, "--merge-file"), vocab_file, merge_file);
}

Gpt2BpeTokenizer Gpt2BpeTokenizer::from_text(const std::string& vocab_json,
                                             const std::string& merges,
                                             const std::string& vocab_name,
                                             const std::string& merge_name) {
  auto model = std::make_shared<Model>();
  // nlohmann::json (a std::map per object), not the ordered Json of plan files: an ordered
  // object looks keys up linearly, quadratic for GPT-2's 50257 entries.
  nlohmann::json vocab;
  try {
    vocab = nlohmann::json::parse(vocab_json);
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(cat(vocab_name, ": not valid JSON (", e.what(), ")"));
  }
  if (!vocab.is_object() || vocab.empty())
    throw Error(cat(vocab_name, ": not a vocabulary (a JSON object of token -> id)"));
  std::unordered_map<std::string, int32_t> encoder;
  model->id_to_token.resize(vocab.size());
  for (const auto& [token, id] : vocab.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
        id.get<int64_t>() >= static_cast<int64_t>(vocab.size()))
      throw Error(cat(vocab_name, ": the id of \"", token, "\" must be an integer in [0, ",
                      vocab.size(), "), got ", id.dump()));
    const auto v = static_cast<int32_t>(id.get<int64_t>());
    if (!model->id_to_token[static_cast<size_t>(v)].empty())
      throw Error(cat(vocab_name, ": id ", v, " is given to two tokens"));
    model->id_to_token[static_cast<size_t>(v)] = token;
    encoder.emplace(token, v);
  }
  for (int32_t& b : model->byte_of) b = -1;
  for (int b = 0; b < 256; ++b) {
    std::string s;
    const char32_t u = gpt2_byte_to_unicode(static_cast<uint8_t>(b));
    append_utf8(s, u);
    model->byte_of[u] = b;
    const auto it = encoder.find(s);
    if (it == encoder.end())
      throw Error(cat(vocab_name, ": no token for byte ", b, " (\"", s,
                      "\"); a GPT-2 vocabulary has one for each of the 256 bytes"));
    model->byte_id[b] = it->second;
  }
  if (const auto it = encoder.find("<|endoftext|>"); it != encoder.end()) model->eod = it->second;

  size_t line_no = 0, pos = 0;
  int32_t rank = 0;
  while (pos <= merges.size()) {
    size_t end = merges.find('\n', pos);
    if (end == std::string::npos) end = merges.size();
    std::string line = merges.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (line_no == 1 && line.rfind("#version", 0) == 0)) continue;
    const size_t space = line.find(' ');
    if (space == std::string::npos || space == 0 || space + 1 == line.size() ||
        line.find(' ', space + 1) != std::string::npos)
      throw Error(cat(merge_name, ":", line_no,
                      ": expected two tokens separated by a space, got \"", line, "\""));
    const std::string a = line.substr(0, space), b = line.substr(space + 1);
    const auto ia = encoder.find(a), ib = encoder.find(b), im = encoder.find(a + b);
    if (ia == encoder.end() || ib == encoder.end() || im == encoder.end())
      throw Error(cat(merge_name, ":", line_no, ": \"",
                      ia == encoder.end()   ? a
                      : ib == encoder.end() ? b
                                            : a + b,
                      "\" is not in the vocabulary ", vocab_name));
    // A repeated pair keeps its last rank (GPT-2 builds a dict from the list).
    model->merges[(uint64_t{static_cast<uint32_t>(ia->second)} << 32) |
                  static_cast<uint32_t>(ib->second)] = {rank++, im->second};
  }
  return Gpt2BpeTokenizer(std::move(model));
}

int64_t Gpt2BpeTokenizer::vocab_size() const {
  return static_cast<int64_t>(model_->id_to_token.size());
}

int32_t Gpt2BpeTokenizer::eod() const {
  if (model_->eod < 0) throw Error("--vocab-file: the vocabulary has no <|endoftext|> token");
  return model_->eod;
}

std::unique_ptr<Tokenizer> Gpt2BpeTokenizer::clone() const {
  return std::unique_ptr<Tokenizer>(new Gpt2BpeTokenizer(model_));
}

void Gpt2BpeTokenizer::encode_piece(std::string_view piece, std::vector<int32_t>& out) {
  if (const auto it = cache_.find(piece); it != cache_.end()) {
    out.insert(out.end(), it->second.begin(), it->second.end());
    return;
  }
  const Model& m = *model_;
  word_.clear();
  for (char ch : piece) word_.push_back(m.byte_id[static_cast<unsigned char>(ch)]);
  while (word_.size() > 1) {
    int32_t best_rank = std::numeric_limits<int32_t>::max(), a = 0, b = 0, merged = 0;
    for (size_t i = 0; i + 1 < word_.size(); ++i) {
      const auto it = m.merges.find((uint64_t{static_cast<uint32_t>(word_[i])} << 32) |
                                    static_cast<uint32_t>(word_[i + 1]));
      if (it != m.merges.end() && it->second.first < best_rank) {
        best_rank = it->second.first;
        a = word_[i];
        b = word_[i + 1];
        merged = it->second.second;
      }
    }
    if (best_rank == std::numeric_limits<int32_t>::max()) break;
    merged_.clear();
    for (size_t i = 0; i < word_.size();) {
      if (word_[i] == a && i + 1 < word_.size() && word_[i + 1] == b) {
        merged_.push_back(merged);
        i += 2;
      } else {
        merged_.push_back(word_[i++]);
      }
    }
    word_.swap(merged_);
  }
  if (cache_.size() >= (1u << 20)) cache_.clear();
  cache_.emplace(std::string(piece), word_);
  out.insert(out.end(), word_.begin(), word_.end());
}

void Gpt2BpeTokenizer::tokenize(std::string_view text, std::vector<int32_t>& out) {
  for (const auto& [begin, end] : gpt2_pretokenize(text))
    encode_piece(text.substr(begin, end - begin), out);
}

std::string Gpt2BpeTokenizer::detokenize(const std::vector<int32_t>& ids) const {
  std::string bytes;
  for (int32_t id : ids) {
    MPLAN_CHECK(id >= 0 && id < vocab_size(), "id ", id);
    const std::string& token = model_->id_to_token[static_cast<size_t>(id)];
    for (size_t i = 0; i < token.size();) {
      const auto [c, len] = decode_utf8(token, i);
      i += len;
      if (c < 324 && model_->byte_of[c] >= 0)
        bytes.push_back(static_cast<char>(model_->byte_of[c]));
      else
        append_utf8(bytes, c);  // not a byte character (e.g. a special token): as is
    }
  }
  return bytes;
}

}  // namespace mplan::exec
