// preprocess_jsonl: batches of lines tokenized by `workers` threads (one tokenizer clone each,
// so their caches stay warm), then written in input order by the calling thread.
#include "exec/data/preprocess.hpp"

#include <chrono>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <thread>

#include "exec/data/indexed_dataset_writer.hpp"
#include "src/common/error.hpp"
#include "src/common/json_reader.hpp"

namespace mplan::exec {
namespace {

constexpr size_t kBatchBytesPerWorker = size_t{1} << 22;  // 4 MiB of input per worker and batch

struct Line {
  int64_t number = 0;
  std::string text;
};

// One document: per key, its tokens and sequence lengths.
struct Encoded {
  std::vector<std::vector<int32_t>> tokens, lengths;
};

bool blank(const std::string& s) { return s.find_first_not_of(" \t\r\n") == std::string::npos; }

void encode_line(const Line& line, const PreprocessOptions& o, Tokenizer& tokenizer, Encoded& out) {
  const std::string where = cat(o.input, ":", line.number);
  Json doc;
  try {
    doc = Json::parse(line.text);
  } catch (const std::exception&) {
    throw Error(cat(where, ": not a JSON object (--input takes one JSON document per line)"));
  }
  if (!doc.is_object()) throw Error(cat(where, ": not a JSON object"));
  out.tokens.assign(o.json_keys.size(), {});
  out.lengths.assign(o.json_keys.size(), {});
  for (size_t k = 0; k < o.json_keys.size(); ++k) {
    const auto it = doc.find(o.json_keys[k]);
    if (it == doc.end()) throw Error(cat(where, ": no key \"", o.json_keys[k], "\" (--json-keys)"));
    std::vector<const Json*> sentences;
    if (it->is_string()) {
      sentences.push_back(&*it);
    } else if (it->is_array()) {
      for (const Json& s : *it) sentences.push_back(&s);
    } else {
      throw Error(cat(where, ": \"", o.json_keys[k], "\" must be a string or a list of strings"));
    }
    std::vector<int32_t>& ids = out.tokens[k];
    for (const Json* s : sentences) {
      if (!s->is_string())
        throw Error(cat(where, ": \"", o.json_keys[k], "\" must be a string or a list of strings"));
      const size_t before = ids.size();
      try {
        tokenizer.tokenize(s->get_ref<const std::string&>(), ids);
      } catch (const Error& e) {
        throw Error(cat(where, ": ", e.what()));
      }
      if (ids.size() > before) out.lengths[k].push_back(static_cast<int32_t>(ids.size() - before));
    }
    if (o.append_eod && !ids.empty()) {
      ids.push_back(tokenizer.eod());
      ++out.lengths[k].back();
    }
  }
}

}  // namespace

PreprocessResult preprocess_jsonl(const PreprocessOptions& o, const Tokenizer& tokenizer,
                                  const std::function<void(const PreprocessProgress&)>& progress) {
  if (o.workers < 1) throw Error(cat("--workers: must be >= 1, got ", o.workers));
  if (o.json_keys.empty()) throw Error("--json-keys: at least one key");
  if (o.append_eod) (void)tokenizer.eod();  // a vocabulary without one fails before any work
  std::ifstream in(o.input, std::ios::binary);
  if (!in) throw Error(cat("--input: cannot read ", o.input));
  std::error_code ec;
  const auto total = static_cast<int64_t>(std::filesystem::file_size(o.input, ec));
  const auto start = std::chrono::steady_clock::now();

  PreprocessResult result;
  std::vector<std::unique_ptr<IndexedDatasetWriter>> writers;
  const TokenDtype dtype = optimal_token_dtype(tokenizer.vocab_size());
  for (const std::string& key : o.json_keys) {
    result.output_prefixes.push_back(cat(o.output_prefix, "_", key, "_document"));
    writers.push_back(std::make_unique<IndexedDatasetWriter>(result.output_prefixes.back(), dtype));
  }
  std::vector<std::unique_ptr<Tokenizer>> tokenizers;
  for (int w = 0; w < o.workers; ++w) tokenizers.push_back(tokenizer.clone());

  PreprocessProgress p;
  p.total_bytes = ec ? 0 : total;
  int64_t line_number = 0;
  std::vector<Line> batch;
  std::vector<Encoded> encoded;
  const size_t batch_bytes = kBatchBytesPerWorker * static_cast<size_t>(o.workers);
  for (bool more = true; more;) {
    batch.clear();
    size_t bytes = 0;
    std::string text;
    while (bytes < batch_bytes && (more = static_cast<bool>(std::getline(in, text)))) {
      ++line_number;
      bytes += text.size() + 1;
      if (!blank(text)) batch.push_back({line_number, std::move(text)});
    }
    if (in.bad()) throw Error(cat("--input: read error in ", o.input));
    encoded.assign(batch.size(), {});
    // Worker w takes lines w, w + W, ...; the first error by line order is rethrown.
    std::vector<std::exception_ptr> errors(batch.size());
    auto work = [&](size_t w) {
      for (size_t i = w; i < batch.size(); i += static_cast<size_t>(o.workers)) {
        try {
          encode_line(batch[i], o, *tokenizers[w], encoded[i]);
        } catch (...) {
          errors[i] = std::current_exception();
          return;
        }
      }
    };
    if (o.workers == 1 || batch.size() < 2) {
      work(0);
    } else {
      std::vector<std::thread> threads;
      for (size_t w = 0; w < static_cast<size_t>(o.workers); ++w) threads.emplace_back(work, w);
      for (std::thread& t : threads) t.join();
    }
    for (const std::exception_ptr& e : errors)
      if (e) std::rethrow_exception(e);
    for (const Encoded& doc : encoded) {
      for (size_t k = 0; k < writers.size(); ++k) {
        writers[k]->add_document(doc.tokens[k], doc.lengths[k]);
        p.tokens += static_cast<int64_t>(doc.tokens[k].size());
      }
      ++p.documents;
    }
    p.bytes_read += static_cast<int64_t>(bytes);
    p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (progress) progress(p);
  }
  for (auto& w : writers) w->finalize();
  result.documents = p.documents;
  result.tokens = p.tokens;
  result.bytes = p.bytes_read;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace mplan::exec
