// `mpirun -np N mplan run PLAN.json`: trains a plan with the executor, Megatron-LM's pretrain()
// (exec/runner/training_loop): synthetic tokens or --data-path's indexed datasets, the learning-
// rate schedule, evaluation, checkpoints (--save / --load), Megatron's log lines, metrics files.
// Afterwards it reports the median iteration time, each rank's peak memory and — beside the
// simulator's prediction for the same plan — the time breakdown of every pipeline stage measured
// from a trace of the last iteration. This file parses the flags (each overriding its plan field),
// makes every check that can be made before anything is allocated (a bad plan, option, data set
// or checkpoint ends all ranks with exit 2, a plan predicted not to fit with exit 1, the first
// failing rank saying why) and prints. Once training has started, any failure aborts the whole
// job (MPI_Abort) except a checkpoint that cannot be written (exit 1 on every rank, one line, the
// previous checkpoint left current); a watchdog ends a job that stops making progress.
#include <algorithm>
#include <chrono>
#include <climits>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>

#include "cli/command_registry.hpp"
#include "cli/output.hpp"
#include "sim/plan_sim/simulate.hpp"
#include "src/common/error.hpp"
#include "src/model/model_stats.hpp"
#include "src/parallel/rank_grid.hpp"
#include "src/plan/plan.hpp"
#include "src/plan/validate.hpp"

#ifdef MPLAN_HAVE_EXEC
#include <mpi.h>

#include "exec/cpu/cpu_backend.hpp"
#include "exec/mpi/fatal.hpp"
#include "exec/mpi/mpi_comm.hpp"
#include "exec/mpi/mpi_runtime.hpp"
#include "exec/runner/checkpoint.hpp"
#include "exec/runner/measured_breakdown.hpp"
#include "exec/runner/run_trace.hpp"
#include "exec/runner/trainer.hpp"
#include "exec/runner/training_data.hpp"
#include "exec/runner/training_log.hpp"
#include "exec/runner/training_loop.hpp"
#include "exec/runner/watchdog.hpp"
#endif
#ifdef MPLAN_HAVE_GPU
// make_cuda_backend(), cuda_device_count() and make_nccl_comm_world() (the CUDA executor).
#include "exec/cuda/cuda_backend.hpp"
#include "exec/cuda/nccl_comm.hpp"
#endif

namespace mplan::cli {
namespace {

inline constexpr int kRunSchemaVersion = 3;

// The flags. Each training flag overrides its plan field (training.*, Megatron's name).
struct RunOptions {
  std::string plan_path;
  std::optional<int64_t> iters;   // iterations in this call (benchmarks; segments of a run)
  std::optional<int64_t> warmup;  // first iterations of this call left out of the median
  std::string json_path;
  std::string trace_path;
  std::string trace_level = "summary";
  std::string backend;  // "cpu", "cuda" or "" (cuda when built with GPUs and one is present)
  bool force = false;
  double watchdog_s = 600;
  // Overrides of the plan's training section.
  std::optional<int64_t> train_iters, seed, lr_decay_iters, lr_warmup_iters, eval_interval,
      eval_iters, save_interval, log_interval;
  std::optional<double> lr, min_lr, lr_warmup_fraction, weight_decay, clip_grad;
  std::optional<std::string> split, lr_decay_style, save, load, tensorboard_dir;
  std::vector<std::string> data_path;
};

#ifdef MPLAN_HAVE_EXEC

using namespace mplan::exec;

struct RankMemory {
  int64_t executor_peak_bytes = 0;
  int64_t device_peak_bytes = -1;
};

// A valid plan the simulator predicts will not fit: exit 1.
struct DoesNotFit {
  std::string message;
};

struct Setup {
  Plan plan;
  std::string backend;  // "cpu" or "cuda"
  int device = -1;
  std::optional<sim::SimulationResult> prediction;  // null when the plan cannot be simulated
  std::string prediction_error;
  // The run: its length, this call's iterations, the schedule, the checkpoint, the data.
  int64_t train_iters = 0;
  bool benchmark = false;  // no train_iters anywhere: --iters at a constant lr
  int64_t iterations = 0;  // in this call
  int64_t warmup = 0;
  int64_t log_interval = 1;
  std::optional<LrSchedule> lr_schedule;
  std::optional<CheckpointInfo> load;
  std::vector<std::string> notes;  // printed by rank 0 before training
  TrainingData data;
};

// The simulator's prediction for the plan as the executor runs it (no dropout: it has none;
// the profile's efficiency set for mplan, whatever stack the plan names).
void predict(Setup& s) {
  sim::SimOptions so;
  so.dropout = false;
  Plan as_run = s.plan;
  as_run.training.implementation = Implementation::kMplan;
  try {
    s.prediction = sim::simulate(as_run, so);
  } catch (const Error& e) {
    s.prediction_error = e.what();
  }
}

// The plan's training section with the flags applied, checked by the plan's own rules; an error
// names the flag (and the field) it concerns.
TrainingConfig training_with_flags(const RunOptions& o, const TrainingConfig& plan_training) {
  auto at_least = [](const char* flag, const auto& v, auto low) {
    if (v && *v < low) throw Error(cat(flag, ": must be >= ", low, ", got ", *v));
  };
  at_least("--train-iters", o.train_iters, 1);
  at_least("--seed", o.seed, 0);
  at_least("--lr-decay-iters", o.lr_decay_iters, 1);
  at_least("--lr-warmup-iters", o.lr_warmup_iters, 0);
  at_least("--eval-interval", o.eval_interval, 0);
  at_least("--eval-iters", o.eval_iters, 0);
  at_least("--save-interval", o.save_interval, 1);
  at_least("--log-interval", o.log_interval, 1);
  at_least("--lr", o.lr, 0.0);
  at_least("--min-lr", o.min_lr, 0.0);
  at_least("--weight-decay", o.weight_decay, 0.0);
  at_least("--clip-grad", o.clip_grad, 0.0);
  if (o.lr_warmup_fraction && !(*o.lr_warmup_fraction >= 0 && *o.lr_warmup_fraction < 1))
    throw Error(cat("--lr-warmup-fraction: must be in [0, 1), got ", *o.lr_warmup_fraction));
  for (const auto& [flag, v] :
       {std::pair{"--save", o.save}, {"--load", o.load}, {"--tensorboard-dir", o.tensorboard_dir}})
    if (v && v->empty()) throw Error(cat(flag, ": an empty directory name"));
  TrainingConfig t = plan_training;
  if (o.train_iters) t.train_iters = *o.train_iters;
  if (o.seed) t.seed = *o.seed;
  if (o.lr) t.lr = *o.lr;
  if (o.min_lr) t.min_lr = *o.min_lr;
  if (o.lr_decay_style) {
    bool known = false;
    for (LrDecayStyle st : {LrDecayStyle::kConstant, LrDecayStyle::kLinear, LrDecayStyle::kCosine,
                            LrDecayStyle::kInverseSquareRoot})
      if (*o.lr_decay_style == to_string(st)) t.lr_decay_style = st, known = true;
    if (!known)
      throw Error(
          cat("--lr-decay-style: must be constant, linear, cosine or inverse-square-root, "
              "got ",
              *o.lr_decay_style));
  }
  if (o.lr_decay_iters) t.lr_decay_iters = *o.lr_decay_iters;
  if (o.lr_warmup_iters) {
    t.lr_warmup_iters = *o.lr_warmup_iters;
    if (!o.lr_warmup_fraction) t.lr_warmup_fraction.reset();  // the flag replaces the plan's
  }
  if (o.lr_warmup_fraction) {
    t.lr_warmup_fraction = *o.lr_warmup_fraction;
    if (!o.lr_warmup_iters) t.lr_warmup_iters = 0;
  }
  if (o.weight_decay) t.weight_decay = *o.weight_decay;
  if (o.clip_grad) t.clip_grad = *o.clip_grad;
  if (!o.data_path.empty()) t.data_path = parse_data_path(o.data_path, "--data-path");
  if (o.split) {
    parse_split(*o.split, "--split");
    t.split = *o.split;
  }
  if (o.eval_interval) t.eval_interval = *o.eval_interval;
  if (o.eval_iters) t.eval_iters = *o.eval_iters;
  if (o.save) t.save = *o.save;
  if (o.load) t.load = *o.load;
  if (o.save_interval) t.save_interval = *o.save_interval;
  if (o.log_interval) t.log_interval = *o.log_interval;
  if (o.tensorboard_dir) t.tensorboard_dir = *o.tensorboard_dir;
  // The plan's rules (Megatron's), on the merged section; "training.min_lr: ..." becomes
  // "--min-lr (training.min_lr): ...".
  try {
    return training_from_json(training_to_json(t), "training");
  } catch (const Error& e) {
    const std::string what = e.what();
    const size_t colon = what.find(':');
    if (!what.starts_with("training.") || colon == std::string::npos) throw;
    const std::string field = what.substr(0, colon);
    std::string flag = "--" + field.substr(9);
    std::replace(flag.begin(), flag.end(), '_', '-');
    throw Error(cat(flag, " (", field, ")", what.substr(colon)));
  }
}

// Whether two paths name one directory, existing or not ("" names none): "ckpt", "./ckpt/" and
// its absolute path are one.
bool same_directory(const std::string& a, const std::string& b) {
  if (a.empty() || b.empty()) return false;
  auto resolved = [](const std::string& p) {
    std::filesystem::path n = std::filesystem::path(p).lexically_normal();
    if (!n.has_filename() && n.has_parent_path()) n = n.parent_path();  // "ckpt/" -> "ckpt"
    std::error_code ec;
    const std::filesystem::path c = std::filesystem::weakly_canonical(n, ec);
    return ec ? n : c;
  };
  return resolved(a) == resolved(b);
}

// Every check that must pass before anything is allocated. Throws Error naming the flag/field,
// or DoesNotFit.
Setup check_run(const RunOptions& o, const ProcessIdentity& id) {
  if (o.iters && *o.iters < 1) throw Error(cat("--iters: must be >= 1, got ", *o.iters));
  if (o.warmup && *o.warmup < 0) throw Error(cat("--warmup: must be >= 0, got ", *o.warmup));
  if (o.watchdog_s < 0) throw Error(cat("--watchdog: must be >= 0 seconds, got ", o.watchdog_s));
  if (o.trace_level != "summary" && o.trace_level != "ops")
    throw Error(cat("--trace-level: must be summary or ops, got \"", o.trace_level, "\""));
  if (o.trace_level == "ops" && o.trace_path.empty())
    throw Error("--trace-level ops: needs --trace FILE (the kernel spans are written there)");
  Setup s;
  s.plan = load_plan(o.plan_path);
  require_valid(s.plan);
  check_executable(s.plan);
  s.plan.training = training_with_flags(o, s.plan.training);
  const TrainingConfig& t = s.plan.training;
  const bool root = id.world_rank == 0;

  // The run's length and this call's iterations. Without train_iters (plan or flag) a run is a
  // benchmark: --iters iterations (default 10) at the constant --lr, every one logged.
  s.benchmark = t.train_iters == 0;
  s.train_iters = s.benchmark ? o.iters.value_or(10) : t.train_iters;
  if (!s.benchmark) {
    s.lr_schedule = LrSchedule::from_training(t, s.plan.parallel.global_batch_size);
  } else {
    for (const auto& [flag, given] : {std::pair{"--lr-decay-style", o.lr_decay_style.has_value()},
                                      {"--min-lr", o.min_lr.has_value()},
                                      {"--lr-decay-iters", o.lr_decay_iters.has_value()},
                                      {"--lr-warmup-iters", o.lr_warmup_iters.has_value()},
                                      {"--lr-warmup-fraction", o.lr_warmup_fraction.has_value()}})
      if (given)
        throw Error(cat(flag,
                        ": a learning-rate schedule needs --train-iters (or the plan's "
                        "training.train_iters); without it a run is a benchmark at the "
                        "constant --lr"));
  }
  s.log_interval = s.benchmark && !o.log_interval ? 1 : t.log_interval;
  if (o.seed && *o.seed < 0) throw Error(cat("--seed: must be >= 0, got ", *o.seed));

  // --load: a checkpoint; its seed is the run's RNG state. Nothing to load is a fresh start
  // (said so) where --load is an empty directory or the --save directory (Megatron-LM's
  // `--save X --load X`, the segments of a run); an absent directory or one holding no complete
  // checkpoint is an error, never a silent fresh start from a typo.
  int64_t start = 0;
  if (!t.load.empty()) {
    int unfinished = 0;
    s.load = find_checkpoint(t.load, s.plan, /*verify_checksums=*/root, &unfinished);
    if (!s.load) {
      const std::string ignored =
          unfinished > 0 ? cat(" (", unfinished, " unfinished saves ignored)") : std::string();
      std::error_code ec;
      const bool empty_dir =
          std::filesystem::is_directory(t.load, ec) && std::filesystem::is_empty(t.load, ec) && !ec;
      if (!empty_dir && !same_directory(t.load, t.save)) {
        throw Error(cat("--load: ", t.load,
                        std::filesystem::exists(t.load, ec) ? " holds no checkpoint" + ignored
                                                            : std::string(" does not exist"),
                        "; --load must name a directory with a checkpoint (", kLatestCheckpointFile,
                        "): leave it out to start fresh, or give it as --save too to start "
                        "fresh there and resume later"));
      }
      s.notes.push_back(cat("--load ", t.load, ": no checkpoint there", ignored,
                            empty_dir ? ", starting fresh (an empty directory)"
                                      : ", starting fresh (it is the --save directory)"));
    } else {
      const CheckpointState& c = s.load->state;
      start = c.iteration;
      for (const std::string& n : s.load->notes) s.notes.push_back(n);
      if (static_cast<int64_t>(c.seed) != t.seed) {
        s.notes.push_back(cat("--load: the checkpoint's seed ", c.seed, " replaces ", t.seed,
                              " (the seed is the run's RNG state: it orders the data)"));
        s.plan.training.seed = static_cast<int64_t>(c.seed);
      }
      if (c.train_iters != s.train_iters && !s.benchmark)
        s.notes.push_back(cat("--load: the checkpoint's run had train_iters ", c.train_iters,
                              ", this one ", s.train_iters,
                              " (with --data-path the sample order follows the new length)"));
      // Megatron's OptimizerParamScheduler refuses a checkpoint of another schedule too.
      auto mismatch = [&](const char* flag, double have, double saved) {
        if (have != saved)
          throw Error(cat(flag, ": ", have, " differs from the checkpoint's ", saved, " (",
                          s.load->dir, "); resume with the schedule it was saved with"));
      };
      if (s.lr_schedule.has_value() != c.lr_schedule.has_value())
        throw Error(cat(s.lr_schedule ? "--train-iters" : "--lr", ": the checkpoint ", s.load->dir,
                        " was saved by a run ",
                        c.lr_schedule ? "with a learning-rate schedule (train_iters set)"
                                      : "at a constant learning rate (no train_iters)",
                        "; resume it the same way"));
      if (s.lr_schedule) {
        const LrSchedule& a = *s.lr_schedule;
        const LrSchedule& b = *c.lr_schedule;
        mismatch("--lr", a.max_lr, b.max_lr);
        mismatch("--min-lr", a.min_lr, b.min_lr);
        mismatch("--lr-warmup-init", a.init_lr, b.init_lr);
        mismatch("--lr-warmup-iters (warmup samples)", a.warmup_steps, b.warmup_steps);
        mismatch("--lr-decay-iters (decay samples)", a.decay_steps, b.decay_steps);
        if (a.style != b.style)
          throw Error(cat("--lr-decay-style: ", to_string(a.style),
                          " differs from the checkpoint's ", to_string(b.style), " (", s.load->dir,
                          ")"));
      } else {
        mismatch("--lr", t.lr, c.constant_lr);
      }
      if (s.benchmark) s.train_iters = start + o.iters.value_or(10);
      if (start >= s.train_iters)
        throw Error(cat("--train-iters: ", s.train_iters, ", but the checkpoint ", s.load->dir,
                        " is at iteration ", start, ": nothing to train"));
    }
  }
  s.iterations = s.train_iters - start;
  if (o.iters && !s.benchmark) s.iterations = std::min(s.iterations, *o.iters);
  s.warmup = o.warmup.value_or(std::min<int64_t>(2, s.iterations - 1));
  if (s.warmup >= s.iterations)
    throw Error(cat("--warmup: must be in [0, --iters) = [0, ", s.iterations, "), got ", s.warmup));

  // --save: a directory of this run's checkpoints; one that holds another run's is not
  // overwritten (pass --load DIR to continue it).
  if (!t.save.empty()) {
    const std::optional<int64_t> there = latest_checkpoint_iteration(t.save);
    std::error_code ec;
    const bool same = s.load && std::filesystem::equivalent(t.save, s.load->root, ec);
    if (there && !same)
      throw Error(cat("--save: ", t.save, " already holds a checkpoint (iteration ", *there,
                      "); a fresh run would replace it: resume it with --load ", t.save,
                      ", or save elsewhere"));
  }
  if (root) {
    for (const auto& [path, flag] : {std::pair{o.json_path, "--json"}, {o.trace_path, "--trace"}})
      if (!path.empty()) {
        std::ofstream probe(path, std::ios::app);  // fail now, not after training
        if (!probe) throw Error(cat(flag, ": cannot write '", path, "'"));
      }
    if (!t.tensorboard_dir.empty()) {
      std::error_code ec;
      std::filesystem::create_directories(t.tensorboard_dir, ec);
      std::ofstream probe(t.tensorboard_dir + "/metrics.jsonl", std::ios::app);
      if (ec || !probe)
        throw Error(cat("--tensorboard-dir: cannot write '", t.tensorboard_dir, "'"));
    }
  }
  int64_t world = s.plan.world_size();
  if (world != id.world_size)
    throw Error(cat("plan: needs ", world, world == 1 ? " rank" : " ranks",
                    " (tp x cp x pp x dp = ", s.plan.parallel.tp, " x ", s.plan.parallel.cp, " x ",
                    s.plan.parallel.pp, " x ", s.plan.parallel.dp, ") but ", id.world_size,
                    " were started; run `mpirun -np ", world, " mplan run ", o.plan_path, "`"));
  int devices = 0;
#ifdef MPLAN_HAVE_GPU
  devices = cuda_device_count();
#endif
  s.backend = o.backend.empty() ? (devices > 0 ? "cuda" : "cpu") : o.backend;
  if (s.backend == "cuda") {
#ifdef MPLAN_HAVE_GPU
    if (devices == 0)
      throw Error("--backend cuda: no CUDA device is visible on host " + id.hostname);
    if (id.local_size > devices)
      throw Error(cat("--backend cuda: ", id.local_size, " ranks run on host ", id.hostname,
                      " but it has ", devices, " GPU", devices == 1 ? "" : "s",
                      " (one GPU per rank)"));
    s.device = id.local_rank;
    const int64_t d = s.plan.model.kv_channels;
    if (d > 128 || d % 8 != 0)
      throw Error(
          cat("model.kv_channels: the CUDA attention kernels take head dims that are "
              "multiples of 8 up to 128, got ",
              d));
#else
    throw Error(
        "--backend cuda: this mplan was built without the GPU executor (CUDA, cuBLAS, NCCL); "
        "use --backend cpu");
#endif
  }
  // The memory check: this rank's stage as predicted, against what its device has free (the
  // plan's GPU memory on CPU ranks).
  predict(s);
  if (s.prediction && !o.force) {
    const int stage = RankGrid(s.plan.parallel).coord(id.world_rank).pp;
    const int64_t need = s.prediction->per_stage.at(static_cast<size_t>(stage)).peak_bytes;
    int64_t have = s.prediction->capacity_bytes;
    std::string where = cat("the plan's ", s.plan.cluster.gpu.name);
#ifdef MPLAN_HAVE_GPU
    if (s.backend == "cuda") {
      have = cuda_free_bytes(s.device);
      where = cat("GPU ", s.device, " on ", id.hostname, " (free now)");
    }
#endif
    if (need > have)
      throw DoesNotFit{cat("plan: predicted peak memory of pipeline stage ", stage, " is ",
                           format_gib(need, 2), " but ", where, " has ", format_gib(have, 2),
                           "; `mplan simulate` shows the breakdown; --force runs anyway")};
  }
  return s;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::vector<std::string> gather_strings(const std::string& mine, int size) {
  int len = static_cast<int>(mine.size());
  std::vector<int> lens(static_cast<size_t>(size));
  MPLAN_MPI_CHECK(MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, MPI_COMM_WORLD));
  std::vector<int> displs(static_cast<size_t>(size), 0);
  for (int r = 1; r < size; ++r) displs[r] = displs[r - 1] + lens[r - 1];
  std::vector<char> all(static_cast<size_t>(displs.back() + lens.back()));
  MPLAN_MPI_CHECK(MPI_Gatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(),
                              MPI_CHAR, 0, MPI_COMM_WORLD));
  std::vector<std::string> out;
  for (int r = 0; r < size; ++r) out.emplace_back(all.data() + displs[r], lens[r]);
  return out;
}

std::string layout_text(const Plan& plan) {
  const ParallelConfig& p = plan.parallel;
  std::string s = cat("tp ", p.tp, " pp ", p.pp, " dp ", p.dp);
  if (p.sequence_parallel) s += " sp";
  if (p.pp > 1) s += cat(", ", to_string(p.schedule));
  if (p.vpp > 1) s += cat(" vpp ", p.vpp);
  if (p.distributed_optimizer) s += ", distributed optimizer";
  if (p.recompute != Recompute::kNone) s += cat(", recompute ", to_string(p.recompute));
  if (p.order != "tp-cp-ep-dp-pp") s += cat(", order ", p.order);
  return s;
}

Json breakdown_json(double compute, double tp, double pp, double dp, double bubble, double opt) {
  return {{"compute_s", compute},
          {"tp_comm_s", tp},
          {"pp_comm_s", pp},
          {"dp_comm_s", dp},
          {"bubble_s", bubble},
          {"optimizer_s", opt},
          {"total_s", compute + tp + pp + dp + bubble + opt}};
}

// (predicted - measured) / measured of each part, the total last, as the printed error row;
// null where nothing was measured.
Json breakdown_error_json(const std::array<double, 6>& pred, const std::array<double, 6>& meas) {
  auto err = [](double p, double m) { return m > 0 ? Json((p - m) / m) : Json(nullptr); };
  double pt = 0, mt = 0;
  for (size_t f = 0; f < 6; ++f) pt += pred[f], mt += meas[f];
  return {{"compute", err(pred[0], meas[0])},
          {"tp_comm", err(pred[1], meas[1])},
          {"pp_comm", err(pred[2], meas[2])},
          {"dp_comm", err(pred[3], meas[3])},
          {"bubble", err(pred[4], meas[4])},
          {"optimizer", err(pred[5], meas[5])},
          {"total", err(pt, mt)}};
}

// Per stage, measured (mean over the stage's ranks) beside predicted and the error of each part,
// printed and as JSON.
Json report_breakdown(const Setup& s, const std::vector<double>& per_rank, int world) {
  const Plan& plan = s.plan;
  const int64_t pp = plan.parallel.pp;
  RankGrid grid(plan.parallel);
  constexpr int kFields = 7;
  std::vector<std::array<double, kFields>> stage(static_cast<size_t>(pp), {0, 0, 0, 0, 0, 0, 0});
  std::vector<int> count(static_cast<size_t>(pp), 0);
  for (int r = 0; r < world; ++r) {
    const size_t st = static_cast<size_t>(grid.coord(r).pp);
    for (int f = 0; f < kFields; ++f)
      stage[st][f] += per_rank[static_cast<size_t>(r * kFields + f)];
    ++count[st];
  }
  Table t({"stage", "", "compute", "tp", "pp", "dp", "bubble", "optimizer", "total"});
  Json out = Json::array();
  auto err = [](double pred, double meas) {
    return meas > 0 ? format_percent((pred - meas) / meas, 0) : std::string("-");
  };
  for (int64_t st = 0; st < pp; ++st) {
    auto& m = stage[static_cast<size_t>(st)];
    for (double& v : m) v /= std::max(1, count[static_cast<size_t>(st)]);
    Json j;
    j["stage"] = st;
    j["measured"] = breakdown_json(m[0], m[1], m[2], m[3], m[4], m[5]);
    j["measured"]["iteration_s"] = m[6];
    std::vector<std::string> meas = {std::to_string(st), "measured"};
    for (int f = 0; f < 6; ++f) meas.push_back(format_ms(m[static_cast<size_t>(f)], 1));
    meas.push_back(format_ms(m[0] + m[1] + m[2] + m[3] + m[4] + m[5], 1));
    t.add_row(meas);
    if (s.prediction) {
      const sim::TimeBreakdown& b = s.prediction->stage_breakdown.at(static_cast<size_t>(st));
      const double tp = b.tp_comm_s + b.cp_comm_s + b.ep_comm_s;
      std::array<double, 6> p{b.compute_s, tp, b.pp_comm_s, b.dp_comm_s, b.bubble_s, b.optimizer_s};
      j["predicted"] = breakdown_json(p[0], p[1], p[2], p[3], p[4], p[5]);
      j["error"] = breakdown_error_json(p, {m[0], m[1], m[2], m[3], m[4], m[5]});
      std::vector<std::string> pred = {"", "predicted"}, e = {"", "error"};
      double pt = 0, mt = 0;
      for (int f = 0; f < 6; ++f) {
        pred.push_back(format_ms(p[static_cast<size_t>(f)], 1));
        e.push_back(err(p[static_cast<size_t>(f)], m[static_cast<size_t>(f)]));
        pt += p[static_cast<size_t>(f)];
        mt += m[static_cast<size_t>(f)];
      }
      pred.push_back(format_ms(pt, 1));
      e.push_back(err(pt, mt));
      t.add_row(pred);
      t.add_row(e);
    }
    out.push_back(j);
  }
  std::cout << "time breakdown of the last iteration per pipeline stage (measured from its trace, "
               "mean over the stage's ranks"
            << (s.prediction ? "; predicted by mplan simulate" : "") << "):\n"
            << t.render("  ");
  return out;
}

// Memory per stage: measured (the largest rank of the stage) beside predicted.
Json report_memory(const Setup& s, const std::vector<RankMemory>& mem,
                   const std::vector<std::string>& hosts) {
  const Plan& plan = s.plan;
  RankGrid grid(plan.parallel);
  Table t({"rank", "host", "stage", "executor peak", "device peak"});
  std::vector<int64_t> stage_peak(static_cast<size_t>(plan.parallel.pp), 0);
  Json ranks = Json::array();
  for (size_t r = 0; r < mem.size(); ++r) {
    const RankMemory& m = mem[r];
    const int st = grid.coord(static_cast<int>(r)).pp;
    const int64_t measured = m.device_peak_bytes >= 0 ? m.device_peak_bytes : m.executor_peak_bytes;
    stage_peak[static_cast<size_t>(st)] = std::max(stage_peak[static_cast<size_t>(st)], measured);
    t.add_row({std::to_string(r), hosts[r], std::to_string(st),
               format_gib(m.executor_peak_bytes, 3),
               m.device_peak_bytes < 0 ? "n/a" : format_gib(m.device_peak_bytes, 3)});
    ranks.push_back({{"rank", r},
                     {"host", hosts[r]},
                     {"stage", st},
                     {"executor_peak_bytes", m.executor_peak_bytes},
                     {"device_peak_bytes", m.device_peak_bytes}});
  }
  std::cout << "peak memory per rank:\n" << t.render("  ");
  Json stages = Json::array();
  if (s.prediction) {
    Table m({"stage", "predicted", "measured", "error"});
    for (size_t st = 0; st < stage_peak.size(); ++st) {
      const int64_t pred = s.prediction->per_stage.at(st).peak_bytes;
      const int64_t meas = stage_peak[st];
      const double e = meas > 0 ? static_cast<double>(pred - meas) / static_cast<double>(meas) : 0;
      m.add_row(
          {std::to_string(st), format_gib(pred, 2), format_gib(meas, 2), format_percent(e, 1)});
      stages.push_back({{"stage", st},
                        {"predicted_peak_bytes", pred},
                        {"measured_peak_bytes", meas},
                        {"error", e}});
    }
    std::cout << "peak memory per pipeline stage (device peak where known), predicted vs "
                 "measured:\n"
              << m.render("  ");
  }
  return {{"ranks", ranks}, {"stages", stages}};
}

std::string schedule_text(const Setup& s) {
  const TrainingConfig& t = s.plan.training;
  if (!s.lr_schedule)
    return cat("constant ", t.lr, " (no train_iters: a benchmark of ", s.train_iters,
               " iterations)");
  const LrSchedule& l = *s.lr_schedule;
  const double G = static_cast<double>(l.global_batch_size);
  std::string text = cat(to_string(l.style), " from ", l.max_lr, " to ", l.min_lr);
  if (l.warmup_steps > 0)
    text += cat(", warmup ", l.warmup_steps / G, " iterations from ", l.init_lr);
  text +=
      cat(", decay over ", l.decay_steps / G, " iterations; ", s.train_iters, " iterations in all");
  return text;
}

// Training: the loop of exec/runner, then the report. Throws CheckpointSaveError on every rank
// when a checkpoint cannot be written.
void train(const RunOptions& o, const Setup& s, const ProcessIdentity& id) {
  const Plan& plan = s.plan;
  const bool root = id.world_rank == 0;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<CommWorld> world;
  GroupMembers groups = trainer_groups(plan.parallel, id.world_rank);
  if (s.backend == "cuda") {
#ifdef MPLAN_HAVE_GPU
    backend = make_cuda_backend(s.device);
    world = make_nccl_comm_world(groups, *backend);
#endif
  } else {
    backend = make_cpu_backend();
    world = std::make_unique<MpiCommWorld>(groups);
  }
  MPLAN_CHECK(backend && world, "backend '", s.backend, "' not available");
  LoopOptions lo;
  lo.train_iters = s.train_iters;
  lo.max_iterations = s.iterations;
  lo.log_interval = s.log_interval;
  lo.lr_schedule = s.lr_schedule;
  lo.load = s.load;
  lo.save = plan.training.save;
  lo.save_interval = plan.training.save_interval;
  lo.tensorboard_dir = plan.training.tensorboard_dir;
  lo.trainer.act = act_dtype_of(plan);
  lo.trainer.seed = static_cast<uint64_t>(plan.training.seed);
  lo.trainer.trace_ops = o.trace_level == "ops";
  lo.print = [](const std::string& text) { std::cout << text << std::flush; };
  if (root) {
    std::cout << "mplan run: " << plan.model.name << " on " << plan.world_size() << " rank"
              << (plan.world_size() > 1 ? "s" : "") << " (" << s.backend << " backend, "
              << to_string(plan.training.precision) << "), " << layout_text(plan) << "\n"
              << "data: " << s.data.description << "\n"
              << "learning rate: " << schedule_text(s) << "\n";
    for (const std::string& n : s.data.notes) std::cout << "data: " << n << "\n";
    for (const std::string& n : s.notes) std::cout << "note: " << n << "\n";
    if (!s.prediction) std::cout << "prediction: not available (" << s.prediction_error << ")\n";
    std::cout << std::flush;
  }
  TrainingLoop loop(plan, s.data, *backend, *world, lo);
  Trainer& trainer = loop.trainer();
  const RankCoord coord = RankGrid(plan.parallel).coord(id.world_rank);
  Watchdog watchdog(
      o.watchdog_s, trainer.progress(), trainer.tracer(),
      cat("rank ", id.world_rank, " (host ", id.hostname, ", pipeline stage ", coord.pp, ")"));
  if (root)
    std::cout << "training iterations " << trainer.iterations_done() + 1 << " to "
              << trainer.iterations_done() + s.iterations << " of " << s.train_iters << ", "
              << trainer.num_microbatches() << " micro-batch"
              << (trainer.num_microbatches() > 1 ? "es" : "") << " of "
              << plan.parallel.micro_batch_size << " x " << plan.model.seq_length
              << " tokens per pipeline per iteration\n"
              << std::flush;
  backend->reset_peak_memory();
  const TrainingResult result = loop.run();
  const std::vector<IterationRecord>& records = result.iterations;
  MPLAN_CHECK(!records.empty(), "a run of no iterations");
  const double world_size = static_cast<double>(plan.world_size());
  const double peak = plan.cluster.gpu.peak_bf16_tflops;

  // The slowest rank's time of every iteration.
  std::vector<double> local(records.size()), slowest(records.size());
  for (size_t i = 0; i < records.size(); ++i) local[i] = records[i].seconds;
  MPLAN_MPI_CHECK(MPI_Reduce(local.data(), slowest.data(), static_cast<int>(local.size()),
                             MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD));
  // The last iteration's trace: breakdown per rank, and the trace file.
  std::vector<Tracer::Timed> spans = result.last_trace.timed();
  const MeasuredBreakdown mb = measure_breakdown(spans);
  double mine[7] = {mb.compute_s, mb.tp_comm_s,   mb.pp_comm_s, mb.dp_comm_s,
                    mb.bubble_s,  mb.optimizer_s, mb.total_s};
  std::vector<double> per_rank(7 * static_cast<size_t>(id.world_size));
  MPLAN_MPI_CHECK(
      MPI_Gather(mine, 7, MPI_DOUBLE, per_rank.data(), 7, MPI_DOUBLE, 0, MPI_COMM_WORLD));
  std::vector<std::string> rank_events;
  if (!o.trace_path.empty())
    rank_events = gather_strings(rank_trace_events(spans, id.world_rank,
                                                   cat("rank ", id.world_rank, " (stage ", coord.pp,
                                                       ", tp ", coord.tp, ", dp ", coord.dp, ")"))
                                     .dump(),
                                 id.world_size);

  MemoryStats ms = backend->memory_stats();
  int64_t mem_mine[2] = {ms.peak_bytes, ms.device_peak_bytes};
  std::vector<int64_t> all(2 * static_cast<size_t>(id.world_size));
  MPLAN_MPI_CHECK(
      MPI_Gather(mem_mine, 2, MPI_INT64_T, all.data(), 2, MPI_INT64_T, 0, MPI_COMM_WORLD));
  std::vector<std::string> hosts = gather_strings(id.hostname, id.world_size);
  if (!root) return;

  std::vector<double> measured;
  for (size_t i = static_cast<size_t>(s.warmup); i < records.size(); ++i)
    measured.push_back(slowest[i]);
  const double med = median(measured);
  const IterationRecord& last = records.back();
  const double tokens = static_cast<double>(last.global_batch * plan.model.seq_length);
  const double flops = megatron_flops(plan.model, last.global_batch, plan.parallel.tp);
  std::cout << "median iteration (" << measured.size() << " after " << s.warmup
            << " warmup, slowest rank): " << format_ms(med, 1) << ", "
            << format_fixed(tokens / med / world_size, 0) << " tokens/s/GPU, "
            << format_fixed(flops / med / world_size / 1e12, 2) << " TFLOP/s/GPU, MFU "
            << format_percent(flops / med / world_size / 1e12 / peak, 1) << " (peak "
            << format_fixed(peak, 1) << " TFLOP/s of " << plan.cluster.gpu.name << ")\n";
  Json prediction;
  if (s.prediction) {
    const double e = (s.prediction->iteration_time_s - med) / med;
    std::cout << "prediction (mplan simulate, same plan, no dropout): iteration "
              << format_ms(s.prediction->iteration_time_s, 1) << " vs measured "
              << format_ms(med, 1) << " (error " << (e >= 0 ? "+" : "") << format_percent(e, 1)
              << ")\n";
    prediction = {{"iteration_time_s", s.prediction->iteration_time_s},
                  {"time_error", e},
                  {"peak_bytes", s.prediction->peak_bytes}};
  } else {
    prediction = {{"error", s.prediction_error}};
  }
  std::vector<RankMemory> mem(static_cast<size_t>(id.world_size));
  for (size_t r = 0; r < mem.size(); ++r) mem[r] = {all[2 * r], all[2 * r + 1]};
  Json memory = report_memory(s, mem, hosts);
  Json breakdown = report_breakdown(s, per_rank, id.world_size);

  if (!o.trace_path.empty()) {
    std::vector<Json> events;
    for (const std::string& e : rank_events) events.push_back(Json::parse(e));
    write_text_file(o.trace_path, run_trace_document(events).dump() + "\n", "--trace");
    std::cout << "trace of the last iteration: " << o.trace_path << "\n";
  }
  if (o.json_path.empty()) return;
  Json j;
  j["schema_version"] = kRunSchemaVersion;
  j["plan"] = o.plan_path;
  j["model"] = plan.model.name;
  j["cluster"] = plan.cluster.name;
  j["backend"] = s.backend;
  j["world_size"] = plan.world_size();
  j["parallel"] = parallel_to_json(plan.parallel);
  j["precision"] = to_string(plan.training.precision);
  j["seed"] = plan.training.seed;
  j["data"] = s.data.description;
  j["train_iters"] = s.train_iters;
  j["start_iteration"] = result.start_iteration;
  j["warmup_iterations"] = s.warmup;
  j["model_flops_per_iteration"] = flops;  // of the last iteration's global batch
  j["flops_formula"] = "Megatron-LM num_floating_point_operations (dense, no recompute)";
  j["peak_bf16_tflops_per_gpu"] = peak;
  Json list = Json::array();
  for (size_t i = 0; i < records.size(); ++i) {
    const IterationRecord& r = records[i];
    const double secs = slowest[i];
    const double tflops =
        megatron_flops(plan.model, r.global_batch, plan.parallel.tp) / secs / world_size / 1e12;
    list.push_back(
        {{"iteration", r.iteration},
         {"warmup", static_cast<int64_t>(i) < s.warmup},
         {"loss", r.loss},
         {"lr", r.lr},
         {"grad_norm", r.grad_norm},
         {"consumed_samples", r.consumed_samples},
         {"microbatches", r.microbatches},
         {"global_batch_size", r.global_batch},
         {"ms", secs * 1e3},
         {"tokens_per_s", static_cast<double>(r.global_batch * plan.model.seq_length) / secs},
         {"tflops_per_gpu", tflops},
         {"mfu", tflops / peak}});
  }
  j["iterations"] = list;
  Json evals = Json::array();
  for (const EvalRecord& e : result.evaluations)
    evals.push_back({{"iteration", e.iteration},
                     {"split", e.split},
                     {"prefix", e.prefix},
                     {"loss", e.loss},
                     {"ppl", perplexity(e.loss)},
                     {"samples", e.samples},
                     {"first_sample", e.first_sample}});
  j["evaluations"] = evals;
  j["checkpoints_saved"] = result.saved;
  j["prediction"] = prediction;
  j["summary"] = {{"median_ms", med * 1e3},
                  {"tokens_per_s", tokens / med},
                  {"tokens_per_s_per_gpu", tokens / med / world_size},
                  {"tflops_per_gpu", flops / med / world_size / 1e12},
                  {"mfu", flops / med / world_size / 1e12 / peak},
                  {"final_loss", last.loss}};
  j["memory"] = memory;
  j["breakdown"] = breakdown;
  write_text_file(o.json_path, j.dump(2) + "\n", "--json");
}

void run_run(const RunOptions& o) {
  MpiRuntime mpi(nullptr, nullptr);
  const ProcessIdentity& id = mpi.identity();
  // Phase 1: checks on every rank; if any fails, every rank exits (2 for bad input, 1 for a plan
  // that does not fit) and the first failing rank says why (ranks may disagree, e.g. on the GPUs
  // of their host).
  Setup setup;
  std::string error;
  int code = 2;
  try {
    setup = check_run(o, id);
  } catch (const Error& e) {
    error = e.what();
  } catch (const DoesNotFit& e) {
    error = e.message;
    code = 1;
  } catch (const std::exception& e) {
    error = cat("internal error: ", e.what());
    code = 1;
  }
  // Every rank learns whether any failed; the first failing rank says why.
  auto agree = [&] {
    int failing = error.empty() ? INT_MAX : id.world_rank, first = INT_MAX;
    MPLAN_MPI_CHECK(MPI_Allreduce(&failing, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    int worst = error.empty() ? 0 : code, exit_code = 0;
    MPLAN_MPI_CHECK(MPI_Allreduce(&worst, &exit_code, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    if (first != INT_MAX) {
      if (first == id.world_rank) std::cerr << "mplan: error: " << error << "\n";
      throw ExitWith{first == id.world_rank ? code : exit_code};
    }
  };
  agree();
  // The data: rank 0 builds (and caches) the dataset indices first, then the others load them.
  try {
    setup.data =
        make_training_data_rank0_first(setup.plan, setup.train_iters, id.world_rank, [](bool ok) {
          int mine = ok ? 0 : 1, failed = 0;
          MPLAN_MPI_CHECK(MPI_Allreduce(&mine, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
          return failed == 0;
        });
  } catch (const Error& e) {
    error = e.what();
    code = 2;
  }
  agree();
  // Phase 2: training. A failure on one rank must not leave the others in a collective; a
  // checkpoint that cannot be written fails on every rank together.
  try {
    train(o, setup, id);
  } catch (const CheckpointSaveError& e) {
    if (id.world_rank == 0) std::cerr << "mplan: error: --save: " << e.what() << "\n";
    throw ExitWith{1};
  } catch (const std::exception& e) {
    MPLAN_FATAL("mplan run failed: ", e.what());
  }
}

#else

void run_run(const RunOptions&) {
  throw Error("run: this mplan was built without MPI, so the executor is not available");
}

#endif  // MPLAN_HAVE_EXEC

void add_run(CLI::App& app) {
  auto opts = std::make_shared<RunOptions>();
  auto* cmd = app.add_subcommand(
      "run",
      "Train a plan as Megatron-LM's pretrain() does (under mpirun, one rank per GPU) and "
      "measure it");
  cmd->add_option("plan", opts->plan_path, "Plan JSON file (e.g. the best.json of mplan sweep)")
      ->required();
  cmd->add_option("--iters", opts->iters,
                  "Iterations to run in this call: without --train-iters a benchmark of K "
                  "iterations at a constant lr (default 10); with it, at most K more of the run "
                  "(a segment; --save/--load carry on)");
  cmd->add_option("--warmup", opts->warmup,
                  "First iterations of this call left out of the median (default 2; < the "
                  "iterations of this call)");
  auto group = [&](const char* name, auto& field, const char* help) {
    cmd->add_option(name, field, help)->group("Training (each overrides the plan's field)");
  };
  group("--train-iters", opts->train_iters,
        "Iterations of the whole run (training.train_iters): the learning-rate schedule and the "
        "data sizes follow it");
  group("--data-path", opts->data_path,
        "Megatron indexed datasets: PREFIX (of PREFIX.bin/.idx) or weighted 'W1 P1 W2 P2 ...' "
        "(default: synthetic tokens)");
  group("--split", opts->split,
        "Train/valid/test shares of the documents (default \"969, 30, 1\")");
  group("--lr", opts->lr, "Peak learning rate");
  group("--min-lr", opts->min_lr, "Learning rate at the end of the decay");
  group("--lr-decay-style", opts->lr_decay_style,
        "constant, linear (default), cosine or inverse-square-root");
  group("--lr-decay-iters", opts->lr_decay_iters, "Iterations of the decay (default train_iters)");
  group("--lr-warmup-iters", opts->lr_warmup_iters, "Iterations of linear warmup");
  group("--lr-warmup-fraction", opts->lr_warmup_fraction,
        "Warmup as a fraction of the decay iterations (instead of --lr-warmup-iters)");
  group("--weight-decay", opts->weight_decay, "AdamW weight decay (not on biases and norms)");
  group("--clip-grad", opts->clip_grad, "Gradient-norm clipping (0: off)");
  group("--eval-interval", opts->eval_interval,
        "Evaluate the validation split every N iterations (0: only at the end)");
  group("--eval-iters", opts->eval_iters, "Batches per evaluation (0: no evaluation)");
  group("--save", opts->save, "Checkpoint directory to write (Megatron's layout)");
  group("--save-interval", opts->save_interval, "Save every N iterations (and at the end)");
  group("--load", opts->load,
        "Checkpoint directory to resume from (must hold one; an empty directory, or the "
        "--save directory when it holds none yet, is a fresh start, said so)");
  group("--log-interval", opts->log_interval,
        "Print Megatron's log line every N iterations (default: the plan's; 1 for benchmarks)");
  group("--tensorboard-dir", opts->tensorboard_dir,
        "Write metrics.jsonl and curves.svg (loss and learning rate) there");
  group("--seed", opts->seed,
        "Seed of the weights and the data (default: the plan's training.seed; a checkpoint's "
        "replaces it)");
  cmd->add_option("--json", opts->json_path,
                  "Also write every iteration (loss, lr, time), the evaluations, the summary, "
                  "per-rank memory and the per-stage breakdown (measured and predicted)");
  cmd->add_option("--trace", opts->trace_path,
                  "Write a Chrome trace of the last iteration (every schedule action and "
                  "collective of every rank), in the schema of `mplan simulate --trace`");
  cmd->add_option("--trace-level", opts->trace_level,
                  "summary (default) or ops: the --trace also times every kernel inside the "
                  "passes, named as `mplan simulate --trace-level ops` names them (two CUDA "
                  "events per kernel)");
  cmd->add_option("--backend", opts->backend,
                  "cpu (reference, MPI ranks on CPU cores) or cuda (one GPU per rank); default: "
                  "cuda when built with GPU support and a GPU is visible, else cpu")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->add_flag("--force", opts->force,
                "Run even when the simulator predicts the plan will not fit in GPU memory");
  cmd->add_option("--watchdog", opts->watchdog_s,
                  "Seconds without progress after which a rank reports what it waits on and "
                  "ends the job (default 600; 0: off)");
  cmd->footer(
      "Runs every dense GPT- or Llama-family plan: tensor, sequence, pipeline (gpipe, 1f1b,\n"
      "interleaved with vpp, zb-h1) and data parallelism, the distributed optimizer,\n"
      "recomputation (selective, full), both rank orders and batch-size ramp-up, as Megatron-LM's\n"
      "pretrain(): the learning-rate schedule, evaluation of the validation split every\n"
      "--eval-interval (forward only) and of the test split at the end, checkpoints every\n"
      "--save-interval, Megatron's log line every --log-interval (plus tokens/s/GPU and MFU). At\n"
      "the end: the median iteration time after warmup, each rank's peak memory and, beside the\n"
      "simulator's prediction, the peak memory and the time breakdown of every pipeline stage.\n"
      "The world size must equal the plan's tp x cp x pp x dp.\n"
      "Exit status: 0 ok; 2 bad plan, option, data or checkpoint (nothing allocated); 1 a plan\n"
      "predicted not to fit (--force overrides), a checkpoint that cannot be written, or a\n"
      "failure while training.\n"
      "Environment (cuda backend): MPLAN_ATTENTION=flash2 (the mma.sync attention kernels on\n"
      "Hopper too) or reference; MPLAN_NO_GEMM_EPILOGUE=1 (bias and GeLU as separate kernels);\n"
      "MPLAN_GEMM_TUNE=1 (time cuBLASLt's candidate algorithms on each GEMM shape's first call\n"
      "and keep the fastest; then the last bits of results may differ between processes).\n"
      "Examples:\n"
      "  mpirun -np 4 mplan run configs/plans/gpt3-1.3b-dp4.json --iters 20 --warmup 5\n"
      "  mpirun -np 4 mplan run configs/plans/gpt3-1.3b-pp4.json --trace run-trace.json\n"
      "  mplan run configs/plans/gpt3-1.3b-1gpu.json --trace ops.json --trace-level ops\n"
      "  mplan run configs/plans/gpt3-1.3b-1gpu.json --data-path data/corpus_text_document \\\n"
      "      --split 949,50,1 --train-iters 2000 --lr 3e-4 --min-lr 3e-5 --lr-decay-style cosine "
      "\\\n"
      "      --lr-warmup-iters 100 --eval-interval 200 --eval-iters 10 --save ckpt --load ckpt \\\n"
      "      --save-interval 500 --log-interval 10 --tensorboard-dir tb\n"
      "  mpirun -np 2 mplan run configs/plans/tiny-gpt-tp2-sp.json --backend cpu --json run.json\n"
      "  mplan run configs/plans/tiny-gpt.json --backend cpu --iters 3");
  cmd->callback([opts] { run_run(*opts); });
}

MPLAN_REGISTER_COMMAND(70, add_run);

}  // namespace
}  // namespace mplan::cli
