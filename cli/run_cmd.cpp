// `mpirun -np N mplan run PLAN.json`: trains the plan on synthetic tokens with the executor and
// reports loss, time, throughput, TFLOP/s and MFU per iteration, then the median iteration time,
// each rank's peak memory, and — beside the simulator's prediction for the same plan — the time
// breakdown of every pipeline stage (compute, exposed TP / PP / DP communication, bubble,
// optimizer) measured from a trace of the last iteration. Every rank checks the plan before
// anything is allocated (a bad plan or option ends all ranks with exit 2, a plan predicted not to
// fit with exit 1, the first failing rank saying why). Once training has started, any failure
// aborts the whole job (MPI_Abort), and a watchdog ends a job that stops making progress.
#include <algorithm>
#include <chrono>
#include <climits>
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
#include "exec/runner/measured_breakdown.hpp"
#include "exec/runner/run_trace.hpp"
#include "exec/runner/trainer.hpp"
#include "exec/runner/watchdog.hpp"
#endif
#ifdef MPLAN_HAVE_GPU
// make_cuda_backend(), cuda_device_count() and make_nccl_comm_world() (the CUDA executor).
#include "exec/cuda/cuda_backend.hpp"
#include "exec/cuda/nccl_comm.hpp"
#endif

namespace mplan::cli {
namespace {

inline constexpr int kRunSchemaVersion = 2;

struct RunOptions {
  std::string plan_path;
  int64_t iters = 10;
  int64_t warmup = 2;
  std::optional<int64_t> seed;
  std::string json_path;
  std::string trace_path;
  std::string backend;  // "cpu", "cuda" or "" (cuda when built with GPUs and one is present)
  bool force = false;
  double watchdog_s = 600;
};

#ifdef MPLAN_HAVE_EXEC

using namespace mplan::exec;

struct IterationRecord {
  int64_t iteration = 0;
  bool warmup = false;
  double loss = 0, grad_norm = 0, seconds = 0;
  int64_t microbatches = 0, global_batch = 0;
  double tokens_per_s = 0, tflops_per_gpu = 0, mfu = 0;
};

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
};

// The simulator's prediction for the plan as the executor runs it (no dropout: it has none).
void predict(Setup& s) {
  sim::SimOptions so;
  so.dropout = false;
  try {
    s.prediction = sim::simulate(s.plan, so);
  } catch (const Error& e) {
    s.prediction_error = e.what();
  }
}

// Every check that must pass before anything is allocated. Throws Error naming the flag/field,
// or DoesNotFit.
Setup check_run(const RunOptions& o, const ProcessIdentity& id) {
  if (o.iters < 1) throw Error(cat("--iters: must be >= 1, got ", o.iters));
  if (o.warmup < 0 || o.warmup >= o.iters)
    throw Error(cat("--warmup: must be in [0, --iters) = [0, ", o.iters, "), got ", o.warmup));
  if (o.seed && *o.seed < 0) throw Error(cat("--seed: must be >= 0, got ", *o.seed));
  if (o.watchdog_s < 0) throw Error(cat("--watchdog: must be >= 0 seconds, got ", o.watchdog_s));
  Setup s;
  s.plan = load_plan(o.plan_path);
  require_valid(s.plan);
  check_executable(s.plan);
  if (o.seed) s.plan.training.seed = *o.seed;
  if (id.world_rank == 0)
    for (const auto& [path, flag] : {std::pair{o.json_path, "--json"}, {o.trace_path, "--trace"}})
      if (!path.empty()) {
        std::ofstream probe(path, std::ios::app);  // fail now, not after training
        if (!probe) throw Error(cat(flag, ": cannot write '", path, "'"));
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

// Per stage, measured (mean over the stage's ranks) beside predicted, printed and as JSON.
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
  TrainerOptions to;
  to.act = act_dtype_of(plan);
  to.seed = static_cast<uint64_t>(plan.training.seed);
  Trainer trainer(plan, *backend, *world, to);
  const RankCoord coord = RankGrid(plan.parallel).coord(id.world_rank);
  Watchdog watchdog(
      o.watchdog_s, trainer.progress(), trainer.tracer(),
      cat("rank ", id.world_rank, " (host ", id.hostname, ", pipeline stage ", coord.pp, ")"));

  const double world_size = static_cast<double>(plan.world_size());
  const double peak = plan.cluster.gpu.peak_bf16_tflops;
  if (root) {
    std::cout << "mplan run: " << plan.model.name << " on " << plan.world_size() << " rank"
              << (plan.world_size() > 1 ? "s" : "") << " (" << s.backend << " backend, "
              << to_string(plan.training.precision) << "), " << layout_text(plan) << ", "
              << trainer.num_microbatches() << " micro-batch"
              << (trainer.num_microbatches() > 1 ? "es" : "") << " of "
              << plan.parallel.micro_batch_size << " x " << plan.model.seq_length
              << " tokens per pipeline per iteration\n";
    if (!s.prediction) std::cout << "prediction: not available (" << s.prediction_error << ")\n";
  }
  std::vector<IterationRecord> records;
  backend->reset_peak_memory();
  // Iteration i lasts from its start to the next one's (the host waits once inside each step);
  // the last one until the device has finished it.
  using clock = std::chrono::steady_clock;
  auto t0 = clock::now();
  auto finish = [&](IterationRecord& rec, clock::time_point end) {
    rec.seconds = std::chrono::duration<double>(end - t0).count();
    t0 = end;
    const double tokens = static_cast<double>(rec.global_batch * plan.model.seq_length);
    const double flops = megatron_flops(plan.model, rec.global_batch, plan.parallel.tp);
    rec.tokens_per_s = tokens / rec.seconds;
    rec.tflops_per_gpu = flops / rec.seconds / world_size / 1e12;
    rec.mfu = rec.tflops_per_gpu / peak;
    records.push_back(rec);
    if (root)
      std::cout << "iter " << rec.iteration << "/" << o.iters << (rec.warmup ? " (warmup)" : "")
                << "  loss " << format_fixed(rec.loss, 4) << "  grad-norm "
                << format_fixed(rec.grad_norm, 3) << "  " << format_ms(rec.seconds, 1)
                << "  tokens/s " << format_fixed(rec.tokens_per_s, 0) << "  TFLOP/s/GPU "
                << format_fixed(rec.tflops_per_gpu, 2) << "  MFU " << format_percent(rec.mfu, 1)
                << "\n"
                << std::flush;
  };
  std::optional<IterationRecord> open;
  for (int64_t i = 0; i < o.iters; ++i) {
    const auto start = clock::now();
    if (open) finish(*open, start);
    StepResult r = trainer.step();
    IterationRecord rec;
    rec.iteration = i + 1;
    rec.warmup = i < o.warmup;
    rec.loss = r.loss;
    rec.grad_norm = r.grad_norm;
    rec.microbatches = r.num_microbatches;
    rec.global_batch = r.global_batch_size;
    open = rec;
  }
  backend->synchronize();
  finish(*open, clock::now());

  // The slowest rank's time of every iteration.
  std::vector<double> local(records.size()), slowest(records.size());
  for (size_t i = 0; i < records.size(); ++i) local[i] = records[i].seconds;
  MPLAN_MPI_CHECK(MPI_Reduce(local.data(), slowest.data(), static_cast<int>(local.size()),
                             MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD));
  // The last iteration's trace: breakdown per rank, and the trace file.
  std::vector<Tracer::Timed> spans = trainer.tracer()->timed();
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

  for (size_t i = 0; i < records.size(); ++i) records[i].seconds = slowest[i];
  std::vector<double> measured;
  for (const auto& r : records)
    if (!r.warmup) measured.push_back(r.seconds);
  const double med = median(measured);
  const IterationRecord& last = records.back();
  const double tokens = static_cast<double>(last.global_batch * plan.model.seq_length);
  const double flops = megatron_flops(plan.model, last.global_batch, plan.parallel.tp);
  std::cout << "median iteration (" << measured.size() << " after " << o.warmup
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
  j["warmup_iterations"] = o.warmup;
  j["model_flops_per_iteration"] = flops;  // of the last iteration's global batch
  j["flops_formula"] = "Megatron-LM num_floating_point_operations (dense, no recompute)";
  j["peak_bf16_tflops_per_gpu"] = peak;
  Json list = Json::array();
  for (const auto& r : records)
    list.push_back({{"iteration", r.iteration},
                    {"warmup", r.warmup},
                    {"loss", r.loss},
                    {"grad_norm", r.grad_norm},
                    {"microbatches", r.microbatches},
                    {"global_batch_size", r.global_batch},
                    {"ms", r.seconds * 1e3},
                    {"tokens_per_s", r.tokens_per_s},
                    {"tflops_per_gpu", r.tflops_per_gpu},
                    {"mfu", r.mfu}});
  j["iterations"] = list;
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
  int failing = error.empty() ? INT_MAX : id.world_rank, first = INT_MAX;
  MPLAN_MPI_CHECK(MPI_Allreduce(&failing, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
  int worst = error.empty() ? 0 : code, exit_code = 0;
  MPLAN_MPI_CHECK(MPI_Allreduce(&worst, &exit_code, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
  if (first != INT_MAX) {
    if (first == id.world_rank) std::cerr << "mplan: error: " << error << "\n";
    throw ExitWith{first == id.world_rank ? code : exit_code};
  }
  // Phase 2: training. A failure on one rank must not leave the others in a collective.
  try {
    train(o, setup, id);
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
      "run", "Train a plan on synthetic tokens (under mpirun, one rank per GPU) and measure it");
  cmd->add_option("plan", opts->plan_path, "Plan JSON file (e.g. the best.json of mplan sweep)")
      ->required();
  cmd->add_option("--iters", opts->iters, "Iterations to train, warmup included (default 10)");
  cmd->add_option("--warmup", opts->warmup,
                  "First iterations left out of the median (default 2; < --iters)");
  cmd->add_option("--seed", opts->seed,
                  "Seed of the weights and the synthetic tokens (default: the plan's "
                  "training.seed)");
  cmd->add_option("--json", opts->json_path,
                  "Also write every iteration, the summary, per-rank memory and the per-stage "
                  "breakdown (measured and predicted) to this file");
  cmd->add_option("--trace", opts->trace_path,
                  "Write a Chrome trace of the last iteration (every schedule action and "
                  "collective of every rank), in the schema of `mplan simulate --trace`");
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
      "Runs every dense GPT plan: tensor, sequence, pipeline (gpipe, 1f1b, interleaved with vpp,\n"
      "zb-h1) and data parallelism, the distributed optimizer, recomputation (selective, full),\n"
      "both rank orders and batch-size ramp-up. Per iteration: loss, gradient norm, time\n"
      "(slowest rank), tokens/s, TFLOP/s per GPU and MFU (Megatron's FLOP count; peak from the\n"
      "plan's cluster). At the end: the median iteration time after warmup, each rank's peak\n"
      "memory and, beside the simulator's prediction, the peak memory and the time breakdown of\n"
      "every pipeline stage (compute, exposed TP / PP / DP communication, bubble, optimizer).\n"
      "The world size must equal the plan's tp x cp x pp x dp.\n"
      "Exit status: 0 ok; 2 bad plan or option (nothing allocated); 1 a plan predicted not to fit\n"
      "(--force overrides), or a failure while training.\n"
      "Examples:\n"
      "  mpirun -np 4 mplan run configs/plans/gpt3-1.3b-dp4.json --iters 20 --warmup 5\n"
      "  mpirun -np 4 mplan run configs/plans/gpt3-1.3b-pp4.json --trace run-trace.json\n"
      "  mpirun -np 2 mplan run configs/plans/tiny-gpt-tp2-sp.json --backend cpu --json run.json\n"
      "  mplan run configs/plans/tiny-gpt.json --backend cpu --iters 3");
  cmd->callback([opts] { run_run(*opts); });
}

MPLAN_REGISTER_COMMAND(70, add_run);

}  // namespace
}  // namespace mplan::cli
