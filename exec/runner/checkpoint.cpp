// Checkpoints: the model's full tensors (src/model/tensor_layout), gathering them on rank 0 by an
// exact sum over the world group, streaming them into safetensors files, the commit protocol
// (temporary directory, rename, marker), and the checks and sharded reads of --load.
#include "exec/runner/checkpoint.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "exec/cpu/bf16.hpp"
#include "exec/data/safetensors_file.hpp"
#include "exec/model/init_rng.hpp"
#include "src/common/error.hpp"
#include "src/common/json_reader.hpp"
#include "src/model/tensor_layout.hpp"

namespace mplan::exec {

namespace fs = std::filesystem;

namespace {

constexpr const char* kModelFile = "model.safetensors";
constexpr const char* kOptimizerFile = "optimizer.safetensors";
constexpr const char* kStateFile = "checkpoint.json";
constexpr const char* kTmpSuffix = ".tmp";
constexpr const char* kStates[3] = {"master.", "exp_avg.", "exp_avg_sq."};

// A parameter of the whole model at full size (the last stage's copy of a tied embedding is the
// word embedding itself and is not stored twice).
struct FullTensor {
  std::string name;
  TensorRole role;
  int64_t model_index = 0;
  int64_t rows = 0, cols = 1;
  int ndim = 2;
  std::vector<int64_t> shape() const {
    return ndim == 1 ? std::vector<int64_t>{rows} : std::vector<int64_t>{rows, cols};
  }
  int64_t numel() const { return rows * cols; }
};

std::vector<FullTensor> full_tensors(const ModelSpec& m, const ParallelConfig& p) {
  std::vector<FullTensor> out;
  for (int64_t r = 0; r < p.pp; ++r)
    for (int64_t c = 0; c < p.vpp; ++c)
      for (const ParamTensor& t : chunk_tensors(m, p, r, c)) {
        if (t.shared_copy) continue;
        out.push_back({tensor_name(t), t.role, t.model_index, t.rows, t.cols, t.ndim});
      }
  std::sort(out.begin(), out.end(),
            [](const FullTensor& a, const FullTensor& b) { return a.model_index < b.model_index; });
  return out;
}

// Rows of the vocabulary-sized tensors depend on the padding of the layout's tp.
bool vocab_rows(TensorRole r) {
  return r == TensorRole::kWordEmbedding || r == TensorRole::kOutputWeight;
}

std::string word_embedding_name(const std::vector<FullTensor>& all) {
  for (const FullTensor& t : all)
    if (t.role == TensorRole::kWordEmbedding) return t.name;
  MPLAN_CHECK(false, "a model without a word embedding");
  return "";
}

// A 64-bit checksum of byte runs (corruption detection, not security): 8-byte words mixed in
// with multiply-rotate steps, then the run's length, finished by splitmix64.
class Checksum {
 public:
  void add(std::span<const std::byte> data) {
    const size_t words = data.size() / 8;
    for (size_t i = 0; i < words; ++i) {
      uint64_t w;
      std::memcpy(&w, data.data() + 8 * i, 8);
      h_ = std::rotl(h_ ^ (w * 0x87c37b91114253d5ull), 27) * 0x4cf5ad432745937full + 0x52dce729;
    }
    uint64_t tail = 0;
    std::memcpy(&tail, data.data() + 8 * words, data.size() - 8 * words);
    h_ = splitmix64(h_ ^ tail ^ (static_cast<uint64_t>(data.size()) << 3));
  }
  std::string hex() const {
    std::ostringstream os;
    os << std::hex;
    os.width(16);
    os.fill('0');
    os << h_;
    return os.str();
  }

 private:
  uint64_t h_ = 0x6a09e667f3bcc908ull;
};

void fsync_path(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(cat(path, ": cannot open to sync (", std::strerror(errno), ")"));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) throw Error(cat(path, ": cannot sync (", std::strerror(err), ")"));
}

// Writes `text` to `path` and syncs it (the file is complete on the disk when this returns).
void write_synced(const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(cat(path, ": cannot create (", std::strerror(errno), ")"));
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t k = ::write(fd, text.data() + done, text.size() - done);
    if (k <= 0) {
      if (k < 0 && errno == EINTR) continue;
      const int err = k < 0 ? errno : ENOSPC;
      ::close(fd);
      throw Error(cat(path, ": cannot write (", std::strerror(err), ")"));
    }
    done += static_cast<size_t>(k);
  }
  const int rc = ::fsync(fd);
  const int err = errno;
  if (::close(fd) != 0 || rc != 0)
    throw Error(cat(path, ": cannot write (", std::strerror(rc != 0 ? err : errno), ")"));
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(cat(path, ": cannot read"));
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

bool is_unfinished_save(const std::string& name) {
  return name.starts_with("iter_") && name.ends_with(kTmpSuffix);
}

// Every rank learns whether all ranks succeeded (a sum of failure flags over the world group).
bool all_ok(Backend& be, Comm& all, bool ok) {
  if (all.size() == 1) return ok;
  Tensor flag = be.alloc(DType::kF32, {1}, "checkpoint");
  be.fill(flag, ok ? 0.0f : 1.0f);
  all.all_reduce(flag, ReduceOp::kSum, Stream::kCompute);
  float failures = 0;
  be.download(&failures, flag);
  be.release(flag);
  return failures == 0.0f;
}

Json lr_schedule_json(const CheckpointState& s) {
  if (!s.lr_schedule) return {{"constant_lr", s.constant_lr}};
  const LrSchedule& l = *s.lr_schedule;
  return {{"max_lr", l.max_lr},
          {"min_lr", l.min_lr},
          {"init_lr", l.init_lr},
          {"warmup_steps", l.warmup_steps},
          {"decay_steps", l.decay_steps},
          {"decay_style", to_string(l.style)},
          {"global_batch_size", l.global_batch_size},
          {"num_steps", s.consumed_train_samples}};
}

DType dtype_of(SafetensorsDtype d) {
  return d == SafetensorsDtype::kBF16  ? DType::kBF16
         : d == SafetensorsDtype::kF32 ? DType::kF32
                                       : DType::kI32;
}

SafetensorsDtype safetensors_dtype(DType d) {
  return d == DType::kBF16 ? SafetensorsDtype::kBF16 : SafetensorsDtype::kF32;
}

// The elements of parameter `spec` this rank holds in the optimizer: (local element, packed
// position, count) pieces of its owned ranges.
struct OwnedPiece {
  int64_t local = 0, packed = 0, count = 0;
};
std::vector<OwnedPiece> owned_pieces(const Optimizer& opt, const ParamSpec& spec) {
  std::vector<OwnedPiece> out;
  int64_t base = 0;
  for (const ShardRange& r : opt.owned()) {
    const int64_t b = std::max(r.begin, spec.offset);
    const int64_t e = std::min(r.end, spec.offset + spec.local_numel());
    if (b < e) out.push_back({b - spec.offset, base + (b - r.begin), e - b});
    base += r.end - r.begin;
  }
  return out;
}

}  // namespace

std::string checkpoint_iteration_dir(int64_t iteration) {
  std::ostringstream os;
  os << "iter_";
  os.width(7);
  os.fill('0');
  os << iteration;
  return os.str();
}

std::optional<int64_t> latest_checkpoint_iteration(const std::string& dir) {
  const std::string marker = cat(dir, "/", kLatestCheckpointFile);
  std::error_code ec;
  if (!fs::exists(marker, ec)) return std::nullopt;
  std::string text = read_text(marker);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ' || text.back() == '\r'))
    text.pop_back();
  int64_t it = -1;
  size_t used = 0;
  try {
    it = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || it < 0)
    throw Error(
        cat("--load: ", marker, " holds \"", text.substr(0, 40), "\", not an iteration number"));
  return it;
}

// ---- save ---------------------------------------------------------------------------------

namespace {

// Rank 0's side of one save: the files being written and the first failure.
struct Writer {
  bool active = false;
  std::string error;
  SafetensorsStreamWriter model, optimizer;
  Checksum model_sum, optimizer_sum;
  template <class F>
  void run(F&& f) {
    if (!active || !error.empty()) return;
    try {
      f();
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
};

}  // namespace

SaveResult save_checkpoint(const std::string& root, Trainer& trainer, CommWorld& world,
                           const CheckpointState& state, const SaveHooks& hooks) {
  Comm& all = world.group("world");
  Backend& be = trainer.backend();
  StageModel& model = trainer.model();
  Optimizer& opt = trainer.optimizer();
  const Plan& plan = trainer.plan();
  const GptDims& dims = model.dims();
  const bool root_rank = all.rank() == 0;
  const int dp_rank = world.group("dp").rank();
  const DType act = model.act_dtype();
  const size_t act_bytes = dtype_size(act);
  const std::vector<FullTensor> tensors = full_tensors(plan.model, plan.parallel);
  const std::string name = checkpoint_iteration_dir(state.iteration);
  const std::string final_dir = cat(root, "/", name), tmp_dir = final_dir + kTmpSuffix;

  Writer w;
  w.active = root_rank;
  // The directory: stale unfinished saves removed, a fresh temporary one.
  w.run([&] {
    std::error_code ec;
    fs::create_directories(root, ec);
    if (ec) throw Error(cat(root, ": cannot create (", ec.message(), ")"));
    for (const auto& entry : fs::directory_iterator(root)) {
      const std::string n = entry.path().filename().string();
      if (is_unfinished_save(n)) fs::remove_all(entry.path());
    }
    if (latest_checkpoint_iteration(root) == state.iteration)
      throw Error(cat(final_dir, " is already the current checkpoint"));
    if (!fs::create_directory(tmp_dir, ec) || ec)
      throw Error(cat(tmp_dir, ": cannot create (", ec ? ec.message() : "exists", ")"));
    for (const FullTensor& t : tensors) {
      w.model.declare(t.name, safetensors_dtype(act), t.shape());
      for (const char* s : kStates)
        w.optimizer.declare(s + t.name, SafetensorsDtype::kF32, t.shape());
    }
    for (SafetensorsStreamWriter* f : {&w.model, &w.optimizer}) {
      f->set_metadata("format", "pt");
      f->set_metadata("mplan", cat("checkpoint of iteration ", state.iteration));
    }
    w.model.open(cat(tmp_dir, "/", kModelFile));
    w.optimizer.open(cat(tmp_dir, "/", kOptimizerFile));
  });
  if (!all_ok(be, all, w.error.empty()))
    throw CheckpointSaveError(root_rank ? w.error : "saving the checkpoint failed on rank 0");

  // This rank's parameters by name.
  std::map<std::string, int> local;
  const ParamLayout& params = model.params();
  for (size_t i = 0; i < params.specs.size(); ++i)
    if (!params.specs[i].shared_copy) local[params.specs[i].name] = static_cast<int>(i);

  // Every state of every tensor: each element comes from exactly one rank; the others add -0.0.
  int64_t max_numel = 0;
  for (const FullTensor& t : tensors) max_numel = std::max(max_numel, t.numel());
  const bool collective = all.size() > 1;
  Tensor scratch;
  if (collective) scratch = be.alloc(DType::kF32, {max_numel}, "checkpoint");
  std::vector<std::byte> full, shard;
  const uint16_t neg_zero_bf16 = 0x8000;
  const float neg_zero = -0.0f;
  for (const FullTensor& t : tensors) {
    auto it = local.find(t.name);
    const ParamSpec* spec =
        it == local.end() ? nullptr : &params.specs[static_cast<size_t>(it->second)];
    const bool duplicate = spec != nullptr && spec->tp_duplicated && dims.tp_rank != 0;
    for (int state_kind = 0; state_kind < 4; ++state_kind) {
      const bool weights = state_kind == 0;
      const DType dtype = weights ? act : DType::kF32;
      const size_t esize = weights ? act_bytes : 4;
      full.resize(static_cast<size_t>(t.numel()) * esize);
      if (collective)  // one rank alone writes every element itself
        for (size_t k = 0; k < static_cast<size_t>(t.numel()); ++k)
          std::memcpy(full.data() + k * esize,
                      esize == 2 ? static_cast<const void*>(&neg_zero_bf16) : &neg_zero, esize);
      if (spec != nullptr && !duplicate) {
        const int64_t n = spec->local_numel();
        const bool whole = n == t.numel();  // not sharded: full_index is the identity
        auto put = [&](int64_t first_local, int64_t count) {
          if (whole) {
            std::memcpy(full.data() + static_cast<size_t>(first_local) * esize, shard.data(),
                        static_cast<size_t>(count) * esize);
            return;
          }
          for (int64_t i = first_local; i < first_local + count; ++i)
            std::memcpy(full.data() + static_cast<size_t>(full_index(*spec, dims, i)) * esize,
                        shard.data() + static_cast<size_t>(i - first_local) * esize, esize);
        };
        if (weights) {
          if (dp_rank == 0) {
            shard.resize(static_cast<size_t>(n) * esize);
            be.download(shard.data(), model.weights().flat_slice(spec->offset, n));
            put(0, n);
          }
        } else if (plan.parallel.distributed_optimizer || dp_rank == 0) {
          const Tensor src = state_kind == 1   ? opt.master()
                             : state_kind == 2 ? opt.exp_avg()
                                               : opt.exp_avg_sq();
          for (const OwnedPiece& p : owned_pieces(opt, *spec)) {
            shard.resize(static_cast<size_t>(p.count) * 4);
            be.download(shard.data(), src.flat_slice(p.packed, p.count));
            put(p.local, p.count);
          }
        }
      }
      if (collective) {
        Tensor buf = scratch.flat_slice(0, t.numel());
        buf.dtype = dtype;  // the scratch holds the largest tensor in f32, so any dtype fits
        be.upload(buf, full.data());
        all.all_reduce(buf, ReduceOp::kSum, Stream::kCompute);
        if (root_rank) be.download(full.data(), buf);
      }
      const std::span<const std::byte> bytes(full.data(), full.size());
      if (weights) {
        w.run([&] {
          w.model.write(t.name, bytes);
          w.model_sum.add(bytes);
        });
      } else {
        w.run([&] {
          w.optimizer.write(kStates[state_kind - 1] + t.name, bytes);
          w.optimizer_sum.add(bytes);
        });
      }
    }
  }
  if (collective) be.release(scratch);

  SaveResult result;
  result.dir = final_dir;
  w.run([&] {
    w.model.close();
    w.optimizer.close();
    const ParallelConfig& p = plan.parallel;
    Json j;
    j["schema_version"] = kCheckpointSchemaVersion;
    j["format"] = "mplan checkpoint";
    j["iteration"] = state.iteration;
    j["consumed_train_samples"] = state.consumed_train_samples;
    j["consumed_valid_samples"] = state.consumed_valid_samples;
    j["optimizer_steps"] = state.optimizer_steps;
    j["seed"] = state.seed;
    j["train_iters"] = state.train_iters;
    j["lr_scheduler"] = lr_schedule_json(state);
    j["model"] = model_to_json(plan.model);
    j["weights_dtype"] = to_string(act);
    j["saved_with"] = {{"tp", p.tp},
                       {"pp", p.pp},
                       {"dp", p.dp},
                       {"vpp", p.vpp},
                       {"sequence_parallel", p.sequence_parallel},
                       {"distributed_optimizer", p.distributed_optimizer}};
    j["qkv_layout"] = "rows [Q heads; K heads; V heads]";
    j["files"] = {{kModelFile, {{"bytes", w.model.file_bytes()}, {"checksum", w.model_sum.hex()}}},
                  {kOptimizerFile,
                   {{"bytes", w.optimizer.file_bytes()}, {"checksum", w.optimizer_sum.hex()}}}};
    write_synced(cat(tmp_dir, "/", kStateFile), j.dump(2) + "\n");
    fsync_path(tmp_dir);
    result.bytes = w.model.file_bytes() + w.optimizer.file_bytes();
  });
  if (root_rank && w.error.empty() && hooks.at) hooks.at("written");
  // Made current only now that every file is on the disk: the directory, then the marker.
  w.run([&] {
    std::error_code ec;
    if (fs::exists(final_dir, ec)) fs::remove_all(final_dir);  // not the marker's: a leftover
    fs::rename(tmp_dir, final_dir, ec);
    if (ec)
      throw Error(
          cat(final_dir, ": cannot rename the finished save into place (", ec.message(), ")"));
    fsync_path(root);
  });
  if (root_rank && w.error.empty() && hooks.at) hooks.at("renamed");
  w.run([&] {
    const std::string marker = cat(root, "/", kLatestCheckpointFile);
    write_synced(marker + kTmpSuffix, cat(state.iteration, "\n"));
    std::error_code ec;
    fs::rename(marker + kTmpSuffix, marker, ec);
    if (ec) throw Error(cat(marker, ": cannot replace (", ec.message(), ")"));
    fsync_path(root);
  });
  if (root_rank && !w.error.empty()) {
    std::error_code ec;
    fs::remove_all(tmp_dir, ec);  // never a damaged checkpoint
    fs::remove(cat(root, "/", kLatestCheckpointFile, kTmpSuffix), ec);
  }
  if (!all_ok(be, all, w.error.empty()))
    throw CheckpointSaveError(root_rank ? w.error : "saving the checkpoint failed on rank 0");
  return result;
}

// ---- load ---------------------------------------------------------------------------------

std::optional<CheckpointInfo> find_checkpoint(const std::string& root, const Plan& plan,
                                              bool verify_checksums, int* ignored) {
  std::error_code ec;
  if (ignored != nullptr) *ignored = 0;
  if (!fs::exists(root, ec)) return std::nullopt;
  if (!fs::is_directory(root, ec)) throw Error(cat("--load: ", root, " is not a directory"));
  const std::optional<int64_t> latest = latest_checkpoint_iteration(root);
  if (!latest) {
    std::vector<std::string> other;
    int unfinished = 0;
    for (const auto& entry : fs::directory_iterator(root)) {
      const std::string n = entry.path().filename().string();
      if (is_unfinished_save(n) || n == cat(kLatestCheckpointFile, kTmpSuffix))
        ++unfinished;
      else
        other.push_back(n);
    }
    if (other.empty()) {
      if (ignored != nullptr) *ignored = unfinished;
      return std::nullopt;
    }
    std::sort(other.begin(), other.end());
    std::string list;
    for (size_t i = 0; i < other.size() && i < 3; ++i) list += cat(i ? ", " : "", other[i]);
    if (other.size() > 3) list += ", ...";
    throw Error(cat("--load: ", root, " has no ", kLatestCheckpointFile, " but is not empty (",
                    list,
                    "): not a checkpoint directory; give an empty or absent one to start fresh"));
  }
  CheckpointInfo info;
  info.root = root;
  info.dir = cat(root, "/", checkpoint_iteration_dir(*latest));
  const std::string& dir = info.dir;
  if (!fs::is_directory(dir, ec))
    throw Error(cat("--load: ", root, "/", kLatestCheckpointFile, " names iteration ", *latest,
                    " but ", dir, " does not exist"));
  const std::string state_path = cat(dir, "/", kStateFile);
  if (!fs::exists(state_path, ec))
    throw Error(cat("--load: ", state_path,
                    " is missing: not a checkpoint mplan wrote (Megatron-LM's torch checkpoints "
                    "are not read)"));
  Json j;
  try {
    j = Json::parse(read_text(state_path));
  } catch (const Error&) {
    throw;
  } catch (const std::exception&) {
    throw Error(cat("--load: ", state_path, " is not valid JSON (a damaged checkpoint)"));
  }
  auto field = [&](const char* key) -> const Json& {
    if (!j.is_object() || !j.contains(key))
      throw Error(cat("--load: ", state_path, " lacks \"", key, "\" (a damaged checkpoint)"));
    return j.at(key);
  };
  try {
    if (field("format") != "mplan checkpoint" ||
        field("schema_version").get<int>() != kCheckpointSchemaVersion)
      throw Error(cat("--load: ", state_path, " is not an mplan checkpoint of schema version ",
                      kCheckpointSchemaVersion));
    CheckpointState& s = info.state;
    s.iteration = field("iteration").get<int64_t>();
    s.consumed_train_samples = field("consumed_train_samples").get<int64_t>();
    s.consumed_valid_samples = field("consumed_valid_samples").get<int64_t>();
    s.optimizer_steps = field("optimizer_steps").get<int64_t>();
    s.seed = field("seed").get<uint64_t>();
    s.train_iters = field("train_iters").get<int64_t>();
    const Json& lr = field("lr_scheduler");
    if (lr.contains("constant_lr")) {
      s.constant_lr = lr.at("constant_lr").get<double>();
    } else {
      LrSchedule l;
      l.max_lr = lr.at("max_lr").get<double>();
      l.min_lr = lr.at("min_lr").get<double>();
      l.init_lr = lr.at("init_lr").get<double>();
      l.warmup_steps = lr.at("warmup_steps").get<double>();
      l.decay_steps = lr.at("decay_steps").get<double>();
      l.global_batch_size = lr.at("global_batch_size").get<int64_t>();
      const std::string style = lr.at("decay_style").get<std::string>();
      bool known = false;
      for (LrDecayStyle st : {LrDecayStyle::kConstant, LrDecayStyle::kLinear, LrDecayStyle::kCosine,
                              LrDecayStyle::kInverseSquareRoot})
        if (style == to_string(st)) l.style = st, known = true;
      if (!known) throw Error(cat("--load: ", state_path, ": unknown decay style ", style));
      s.lr_schedule = l;
    }
    if (s.iteration != *latest)
      throw Error(cat("--load: ", state_path, " is of iteration ", s.iteration, ", not ", *latest));
    const std::string wd = field("weights_dtype").get<std::string>();
    if (wd != "bf16" && wd != "f32")
      throw Error(cat("--load: ", state_path, ": weights dtype ", wd));
    info.weights_dtype = wd == "bf16" ? DType::kBF16 : DType::kF32;
    const Json& sw = field("saved_with");
    info.saved_layout = cat("tp ", sw.at("tp").get<int64_t>(), ", pp ", sw.at("pp").get<int64_t>(),
                            ", dp ", sw.at("dp").get<int64_t>());
    if (sw.at("distributed_optimizer").get<bool>()) info.saved_layout += ", distributed optimizer";
    // Another model: any field that shapes the parameters or what they compute.
    const ModelSpec saved = model_from_json(field("model"), "checkpoint.json model");
    const ModelSpec& m = plan.model;
    auto differs = [&](const char* what, auto a, auto b) {
      if (a != b)
        throw Error(cat("--load: ", dir, " holds another model: ", what, " ", a, " (this plan's ",
                        m.name, ": ", b, ")"));
    };
    differs("num_layers", saved.num_layers, m.num_layers);
    differs("hidden_size", saved.hidden_size, m.hidden_size);
    differs("num_attention_heads", saved.num_attention_heads, m.num_attention_heads);
    differs("num_query_groups", saved.num_query_groups, m.num_query_groups);
    differs("kv_channels", saved.kv_channels, m.kv_channels);
    differs("ffn_hidden_size", saved.ffn_hidden_size, m.ffn_hidden_size);
    differs("vocab_size", saved.vocab_size, m.vocab_size);
    differs("max_position_embeddings", saved.max_position_embeddings, m.max_position_embeddings);
    differs("activation", to_string(saved.activation), to_string(m.activation));
    differs("normalization", to_string(saved.normalization), to_string(m.normalization));
    differs("position_embedding", to_string(saved.position_embedding),
            to_string(m.position_embedding));
    differs("tied_embeddings", saved.tied_embeddings, m.tied_embeddings);
    differs("add_bias_linear", saved.add_bias_linear, m.add_bias_linear);
  } catch (const Json::exception&) {
    throw Error(
        cat("--load: ", state_path, " has a field of the wrong type (a damaged checkpoint)"));
  }
  // The files: sizes, headers, every tensor this plan needs with its shape, checksums.
  const Json& files = field("files");
  const std::vector<FullTensor> tensors = full_tensors(plan.model, plan.parallel);
  for (const char* file : {kModelFile, kOptimizerFile}) {
    const std::string path = cat(dir, "/", file);
    if (!files.contains(file))
      throw Error(cat("--load: ", state_path, " does not list ", file, " (a damaged checkpoint)"));
    if (!fs::exists(path, ec))
      throw Error(cat("--load: ", path, " is missing (a partial checkpoint)"));
    const int64_t want = files.at(file).at("bytes").get<int64_t>();
    const auto have = static_cast<int64_t>(fs::file_size(path, ec));
    if (ec || have != want)
      throw Error(cat("--load: ", path, " has ", have, " bytes, not the ", want,
                      " written (a partial or damaged checkpoint)"));
    const SafetensorsFile st = [&] {
      try {
        return SafetensorsFile(path);
      } catch (const Error& e) {
        throw Error(cat("--load: ", e.what()));
      }
    }();
    const bool model_file = std::strcmp(file, kModelFile) == 0;
    for (const FullTensor& t : tensors) {
      for (int k = 0; k < (model_file ? 1 : 3); ++k) {
        const std::string n = model_file ? t.name : kStates[k] + t.name;
        const SafetensorsFile::Entry* e = st.find(n);
        if (e == nullptr)
          throw Error(cat("--load: ", path, " has no tensor ", n, " (another model)"));
        std::vector<int64_t> shape = t.shape();
        const bool rows_may_differ =
            vocab_rows(t.role) && e->shape.size() == 2 && e->shape[0] >= plan.model.vocab_size;
        if (rows_may_differ) shape[0] = e->shape[0];
        if (e->shape != shape)
          throw Error(cat("--load: ", path, ": ", n, " has another shape than this plan's model ",
                          "(another model)"));
        if (rows_may_differ && e->shape[0] != t.rows && model_file)
          info.notes.push_back(cat(n, ": ", e->shape[0], " rows saved, ", t.rows,
                                   " in this layout (the vocabulary is padded for another tp): ",
                                   e->shape[0] < t.rows ? "new rows start from the seed's values"
                                                        : "the extra rows are dropped"));
        if (model_file && dtype_of(e->dtype) != info.weights_dtype)
          throw Error(cat("--load: ", path, ": ", n, " is not ", to_string(info.weights_dtype)));
      }
    }
    if (verify_checksums) {
      Checksum sum;
      for (const std::string& n : st.names()) sum.add(st.find(n)->data);
      const std::string want_sum = files.at(file).at("checksum").get<std::string>();
      if (sum.hex() != want_sum)
        throw Error(cat("--load: ", path, " does not match its checksum (a damaged checkpoint)"));
    }
  }
  return info;
}

void load_checkpoint(const CheckpointInfo& info, Trainer& trainer) {
  Backend& be = trainer.backend();
  StageModel& model = trainer.model();
  Optimizer& opt = trainer.optimizer();
  const Plan& plan = trainer.plan();
  const GptDims& dims = model.dims();
  const DType act = model.act_dtype();
  const SafetensorsFile mfile(cat(info.dir, "/", kModelFile));
  const SafetensorsFile ofile(cat(info.dir, "/", kOptimizerFile));
  const std::vector<FullTensor> tensors = full_tensors(plan.model, plan.parallel);
  const std::string wte = word_embedding_name(tensors);
  const ParamLayout& params = model.params();

  // Element `local` of `spec`'s shard from a saved full tensor, or nullopt for a vocabulary row
  // the checkpoint does not have.
  auto saved_index = [&](const ParamSpec& spec, const SafetensorsFile::Entry& e,
                         int64_t local) -> std::optional<int64_t> {
    const int64_t fi = full_index(spec, dims, local);
    if (e.shape.size() == 2 && fi / spec.cols >= e.shape[0]) return std::nullopt;
    return fi;
  };
  auto f32_at = [](const SafetensorsFile::Entry& e, int64_t i) {
    float v;
    std::memcpy(&v, e.data.data() + 4 * i, 4);
    return v;
  };

  std::vector<float> init;
  std::vector<std::byte> host;
  for (const ParamSpec& spec : params.specs) {
    const std::string name = spec.shared_copy ? wte : spec.name;
    const int64_t n = spec.local_numel();
    const SafetensorsFile::Entry& w = *mfile.find(name);
    const SafetensorsFile::Entry& master = *ofile.find(std::string(kStates[0]) + name);
    init.clear();
    if (vocab_rows(spec.role) && w.shape[0] < spec.rows) {
      init.resize(static_cast<size_t>(n));
      model.init_values(spec, 0, n, init.data());
    }
    host.resize(static_cast<size_t>(n) * dtype_size(act));
    // Not sharded, all rows saved, the same dtype: the saved bytes as they are.
    const bool whole =
        static_cast<int64_t>(w.data.size()) == n * static_cast<int64_t>(dtype_size(act));
    if (whole && info.weights_dtype == act) {
      std::memcpy(host.data(), w.data.data(), host.size());
      be.upload(model.weights().flat_slice(spec.offset, n), host.data());
      continue;
    }
    for (int64_t i = 0; i < n; ++i) {
      const std::optional<int64_t> fi = saved_index(spec, w, i);
      std::byte* out = host.data() + static_cast<size_t>(i) * dtype_size(act);
      if (fi && info.weights_dtype == act) {
        std::memcpy(out, w.data.data() + *fi * static_cast<int64_t>(dtype_size(act)),
                    dtype_size(act));
        continue;
      }
      const float v = fi ? f32_at(master, *fi) : init[static_cast<size_t>(i)];
      if (act == DType::kF32) {
        std::memcpy(out, &v, 4);
      } else {
        const uint16_t h = f32_to_bf16(v);
        std::memcpy(out, &h, 2);
      }
    }
    be.upload(model.weights().flat_slice(spec.offset, n), host.data());
  }

  // Master weights and moments of the owned elements, packed as the optimizer keeps them.
  const int64_t owned = opt.owned_elems();
  std::vector<std::vector<float>> packed(3, std::vector<float>(static_cast<size_t>(owned), 0.0f));
  for (const ParamSpec& spec : params.specs) {
    const std::string name = spec.shared_copy ? wte : spec.name;
    const SafetensorsFile::Entry* state[3];
    for (int k = 0; k < 3; ++k) state[k] = ofile.find(kStates[k] + name);
    init.clear();
    if (vocab_rows(spec.role) && state[0]->shape[0] < spec.rows) {
      init.resize(static_cast<size_t>(spec.local_numel()));
      model.init_values(spec, 0, spec.local_numel(), init.data());
    }
    const bool whole = static_cast<int64_t>(state[0]->data.size()) == 4 * spec.local_numel();
    for (const OwnedPiece& p : owned_pieces(opt, spec)) {
      if (whole) {  // not sharded, all rows saved: contiguous in the file
        for (int k = 0; k < 3; ++k)
          std::memcpy(packed[static_cast<size_t>(k)].data() + p.packed,
                      state[k]->data.data() + 4 * p.local, static_cast<size_t>(4 * p.count));
        continue;
      }
      for (int64_t i = 0; i < p.count; ++i) {
        const std::optional<int64_t> fi = saved_index(spec, *state[0], p.local + i);
        const auto at = static_cast<size_t>(p.packed + i);
        for (int k = 0; k < 3; ++k)
          packed[static_cast<size_t>(k)][at] =
              fi ? f32_at(*state[k], *fi)
                 : (k == 0 ? init[static_cast<size_t>(p.local + i)] : 0.0f);
      }
    }
  }
  if (owned > 0) {
    be.upload(opt.master(), packed[0].data());
    be.upload(opt.exp_avg(), packed[1].data());
    be.upload(opt.exp_avg_sq(), packed[2].data());
  }
  trainer.restore_counters(info.state.iteration, info.state.consumed_train_samples,
                           info.state.optimizer_steps);
}

}  // namespace mplan::exec
