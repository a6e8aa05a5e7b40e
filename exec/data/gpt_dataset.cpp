// GptDataset: the document, sample and shuffle indices (Megatron's _build_document_sample_
// shuffle_indices, helpers.cpp build_sample_idx) and sample reads across document boundaries.
#include "exec/data/gpt_dataset.hpp"

#include <sys/stat.h>

#include <unistd.h>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "exec/data/md5.hpp"
#include "exec/data/numpy_random.hpp"
#include "src/common/error.hpp"
#include "src/common/json_reader.hpp"

namespace mplan::exec {
namespace {

constexpr int64_t kExtraToken = 1;  // add_extra_token_to_sequence

// The documents repeated num_epochs times and shuffled (Megatron's _build_document_index).
void append_document_index(std::vector<int32_t>& out, int64_t first, int64_t end,
                           int64_t num_epochs, NumpyRandomState& rng) {
  const size_t start = out.size();
  for (int64_t e = 0; e < num_epochs; ++e)
    for (int64_t d = first; d < end; ++d) out.push_back(static_cast<int32_t>(d));
  rng.shuffle(std::span<int32_t>(out.data() + start, out.size() - start));
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_text_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = cat(path, ".tmp.", ::getpid());
  {
    std::ofstream out(tmp, std::ios::binary);
    out << text;
    out.flush();
    if (!out) throw Error(cat(path, ": cannot write (", std::strerror(errno), ")"));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw Error(cat(path, ": cannot write (", ec.message(), ")"));
}

int64_t mtime_ns(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return 0;
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

}  // namespace

const char* to_string(DataSplit s) {
  switch (s) {
    case DataSplit::kTrain:
      return "train";
    case DataSplit::kValid:
      return "valid";
    case DataSplit::kTest:
      return "test";
  }
  return "?";
}

GptDataset::GptDataset(std::shared_ptr<const IndexedDataset> dataset, int64_t first_document,
                       int64_t end_document, int64_t num_samples, DataSplit split,
                       const GptDatasetConfig& config)
    : dataset_(std::move(dataset)),
      first_document_(first_document),
      end_document_(end_document),
      num_samples_(num_samples),
      split_(split),
      config_(config) {
  MPLAN_CHECK(dataset_ && first_document >= 0 && first_document <= end_document &&
                  end_document <= dataset_->num_sequences(),
              "documents [", first_document, ", ", end_document, ")");
  if (config_.seq_length < 1)
    throw Error(cat("--seq-length: must be >= 1, got ", config_.seq_length));
  int64_t tokens_per_epoch = 0;
  for (int64_t d = first_document_; d < end_document_; ++d)
    tokens_per_epoch += dataset_->sequence_length(d);
  if (tokens_per_epoch < config_.seq_length + kExtraToken) {
    if (num_samples_ > 0)
      throw Error(cat(dataset_->prefix(), ": the ", to_string(split_), " split (documents [",
                      first_document_, ", ", end_document_, ") of ", dataset_->num_sequences(),
                      ", --split ", config_.split.empty() ? "?" : config_.split, ") holds ",
                      tokens_per_epoch, " tokens, fewer than one sample of seq_length + 1 = ",
                      config_.seq_length + kExtraToken, " tokens"));
    num_built_samples_ = 0;  // nothing asked, nothing to build
    return;
  }
  // Megatron's _get_num_epochs.
  num_epochs_ = 1;
  if (num_samples_ >= 0) {
    int64_t tokens = tokens_per_epoch;
    const int64_t requested = num_samples_ * config_.seq_length + kExtraToken;
    while (tokens < requested) {
      ++num_epochs_;
      tokens += tokens_per_epoch;
    }
  }

  Json d;
  d["class"] = "GPTDataset";
  d["dataset_path"] = dataset_->prefix();
  d["num_samples"] = num_samples_ >= 0 ? Json(num_samples_) : Json(nullptr);
  d["index_split"] = to_string(split_);
  d["random_seed"] = config_.seed;
  d["sequence_length"] = config_.seq_length;
  d["split"] = config_.split;
  d["documents"] = {first_document_, end_document_};
  d["idx_bytes"] = dataset_->idx_bytes();
  d["idx_mtime_ns"] = mtime_ns(dataset_->prefix() + ".idx");
  d["bin_bytes"] = dataset_->bin_bytes();
  description_ = d.dump(4);

  if (!config_.no_cache) {
    std::string dir = config_.cache_path;
    if (dir.empty()) dir = dataset_->prefix() + "/cache/GPTDataset_indices";
    cache_prefix_ = cat(dir, "/", md5_hex(description_), "-GPTDataset-", to_string(split_), "-");
    if (load_cached()) {
      cache_status_ = IndexCacheStatus::kLoaded;
      return;
    }
  }
  build_indices(tokens_per_epoch);
  if (!config_.no_cache) {
    save_cache();
    cache_status_ = IndexCacheStatus::kBuilt;
  }
}

void GptDataset::build_indices(int64_t tokens_per_epoch) {
  const int64_t seq = config_.seq_length;
  bool separate_final_epoch = false;
  int64_t num_samples_sans_final_epoch = 0;
  if (num_epochs_ > 1) {
    num_samples_sans_final_epoch = ((num_epochs_ - 1) * tokens_per_epoch - kExtraToken) / seq;
    const int64_t from_final_epoch = num_samples_ - num_samples_sans_final_epoch;
    const int64_t per_epoch = (tokens_per_epoch - kExtraToken) / seq;
    MPLAN_CHECK(from_final_epoch >= 0 && from_final_epoch <= per_epoch + 1, "final epoch ",
                from_final_epoch, " of ", per_epoch);
    separate_final_epoch =
        from_final_epoch < static_cast<int64_t>(0.80 * static_cast<double>(per_epoch));
  }
  NumpyRandomState rng(config_.seed);

  // Document index (int32, as Megatron's).
  std::vector<int32_t> docs;
  const int64_t num_docs = end_document_ - first_document_;
  MPLAN_CHECK(end_document_ <= std::numeric_limits<int32_t>::max(), "document ids above int32");
  docs.reserve(static_cast<size_t>(num_epochs_ * num_docs));
  if (!separate_final_epoch) {
    append_document_index(docs, first_document_, end_document_, num_epochs_, rng);
  } else {
    append_document_index(docs, first_document_, end_document_, num_epochs_ - 1, rng);
    append_document_index(docs, first_document_, end_document_, 1, rng);
  }
  document_index_ = NpyArray(NpyDtype::kI32, {static_cast<int64_t>(docs.size())});
  for (size_t i = 0; i < docs.size(); ++i) document_index_.set(static_cast<int64_t>(i), docs[i]);

  // Sample index (build_sample_idx, dropping the last partial sequence).
  const int64_t num_samples_total = (num_epochs_ * tokens_per_epoch - kExtraToken) / seq;
  int64_t max_length = 0;
  for (int64_t d = first_document_; d < end_document_; ++d)
    max_length = std::max<int64_t>(max_length, dataset_->sequence_length(d));
  const bool wide = std::max<int64_t>(static_cast<int64_t>(docs.size()), max_length) >
                    std::numeric_limits<int32_t>::max();
  sample_index_ = NpyArray(wide ? NpyDtype::kI64 : NpyDtype::kI32, {num_samples_total + 1, 2});
  int64_t row = 0, doc_pos = 0, doc_offset = 0;
  sample_index_.set(0, 0);
  sample_index_.set(1, 0);
  ++row;
  const int64_t last_pos = static_cast<int64_t>(docs.size()) - 1;
  while (row <= num_samples_total) {
    int64_t remaining = seq + kExtraToken;
    while (remaining != 0) {
      const int64_t doc_length =
          dataset_->sequence_length(docs[static_cast<size_t>(doc_pos)]) - doc_offset;
      remaining -= doc_length;
      if (remaining <= 0) {
        doc_offset += remaining + doc_length - kExtraToken;
        remaining = 0;
      } else {
        if (doc_pos == last_pos) {
          MPLAN_CHECK(row == num_samples_total, "ran out of documents at sample ", row);
          doc_offset = dataset_->sequence_length(docs[static_cast<size_t>(doc_pos)]) - kExtraToken;
          break;
        }
        ++doc_pos;
        doc_offset = 0;
      }
    }
    sample_index_.set(2 * row, doc_pos);
    sample_index_.set(2 * row + 1, doc_offset);
    ++row;
  }
  num_built_samples_ = num_samples_total;

  // Shuffle index (_build_shuffle_index): uint32 unless the size needs int64.
  const int64_t total = num_samples_total;
  const int64_t first_part = separate_final_epoch ? num_samples_sans_final_epoch : total;
  const bool big = total >= static_cast<int64_t>(std::numeric_limits<uint32_t>::max()) - 1;
  shuffle_index_ = NpyArray(big ? NpyDtype::kI64 : NpyDtype::kU32, {total});
  std::vector<int64_t> perm(static_cast<size_t>(total));
  for (int64_t i = 0; i < total; ++i) perm[static_cast<size_t>(i)] = i;
  rng.shuffle(std::span<int64_t>(perm.data(), static_cast<size_t>(first_part)));
  if (first_part < total)
    rng.shuffle(
        std::span<int64_t>(perm.data() + first_part, static_cast<size_t>(total - first_part)));
  for (int64_t i = 0; i < total; ++i) shuffle_index_.set(i, perm[static_cast<size_t>(i)]);
}

bool GptDataset::load_cached() {
  const std::string description_path = cache_prefix_ + "description.txt";
  if (read_text(description_path) != description_) return false;
  try {
    NpyArray doc = NpyArray::load(cache_prefix_ + "document_index.npy");
    NpyArray sample = NpyArray::load(cache_prefix_ + "sample_index.npy");
    NpyArray shuffle = NpyArray::load(cache_prefix_ + "shuffle_index.npy");
    const int64_t num_docs = end_document_ - first_document_;
    if (doc.shape() != std::vector<int64_t>{num_epochs_ * num_docs}) return false;
    if (sample.shape().size() != 2 || sample.shape()[1] != 2 || sample.shape()[0] < 1) return false;
    const int64_t n = sample.shape()[0] - 1;
    if (shuffle.shape() != std::vector<int64_t>{n}) return false;
    if (num_samples_ >= 0 && n < num_samples_) return false;
    // Every value that sample() will follow is in range.
    for (int64_t i = 0; i < doc.numel(); ++i)
      if (doc.at(i) < first_document_ || doc.at(i) >= end_document_) return false;
    for (int64_t i = 0; i <= n; ++i) {
      const int64_t pos = sample.at(2 * i), off = sample.at(2 * i + 1);
      if (pos < 0 || pos >= doc.numel() || off < 0 ||
          off >= std::max<int64_t>(1, dataset_->sequence_length(doc.at(pos))))
        return false;
    }
    for (int64_t i = 0; i < n; ++i)
      if (shuffle.at(i) < 0 || shuffle.at(i) >= n) return false;
    document_index_ = std::move(doc);
    sample_index_ = std::move(sample);
    shuffle_index_ = std::move(shuffle);
    num_built_samples_ = n;
    return true;
  } catch (const Error&) {
    return false;  // unreadable or malformed: rebuild
  }
}

void GptDataset::save_cache() const {
  const std::filesystem::path dir = std::filesystem::path(cache_prefix_).parent_path();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    throw Error(cat(dir.string(), ": cannot create the dataset index cache (", ec.message(),
                    "); give a writable --data-cache-path"));
  document_index_.save(cache_prefix_ + "document_index.npy");
  sample_index_.save(cache_prefix_ + "sample_index.npy");
  shuffle_index_.save(cache_prefix_ + "shuffle_index.npy");
  write_text_atomically(cache_prefix_ + "description.txt", description_);  // last: marks complete
}

void GptDataset::sample(int64_t index, std::span<int32_t> out) const {
  MPLAN_CHECK(index >= 0 && index < num_built_samples_, "sample ", index, " of ",
              num_built_samples_, " (", to_string(split_), ")");
  MPLAN_CHECK(static_cast<int64_t>(out.size()) == config_.seq_length + kExtraToken, "out has ",
              out.size());
  const int64_t j = shuffle_index_.at(index);
  const int64_t beg = sample_index_.at(2 * j), beg_offset = sample_index_.at(2 * j + 1);
  const int64_t end = sample_index_.at(2 * j + 2), end_offset = sample_index_.at(2 * j + 3);
  size_t at = 0;
  auto take = [&](int64_t pos, int64_t offset, int64_t length) {
    const int64_t doc = document_index_.at(pos);
    MPLAN_CHECK(at + static_cast<size_t>(length) <= out.size(), "sample ", index, " overflows");
    dataset_->read(doc, offset, out.subspan(at, static_cast<size_t>(length)));
    at += static_cast<size_t>(length);
  };
  if (beg == end) {
    take(beg, beg_offset, end_offset - beg_offset + kExtraToken);
  } else {
    for (int64_t pos = beg; pos <= end; ++pos) {
      const int64_t offset = pos == beg ? beg_offset : 0;
      const int64_t length = pos < end ? dataset_->sequence_length(document_index_.at(pos)) - offset
                                       : end_offset + kExtraToken;
      take(pos, offset, length);
    }
  }
  MPLAN_CHECK(at == out.size(), "sample ", index, " has ", at, " tokens, expected ", out.size());
}

}  // namespace mplan::exec
