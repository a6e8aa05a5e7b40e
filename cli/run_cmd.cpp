// `mpirun -np N mplan run PLAN.json`: trains the plan on synthetic tokens with the executor and
// reports loss, time, throughput, TFLOP/s and MFU per iteration, then the median iteration time
// and each rank's peak memory. Every rank checks the plan before anything is allocated; a bad
// plan or option ends all ranks with exit 2 (the first failing rank prints why). Once training
// has started, any failure aborts the whole job (MPI_Abort), so no rank is left waiting.
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
#include "src/plan/plan.hpp"
#include "src/plan/validate.hpp"

#ifdef MPLAN_HAVE_EXEC
#include <mpi.h>

#include "exec/cpu/cpu_backend.hpp"
#include "exec/mpi/fatal.hpp"
#include "exec/mpi/mpi_comm.hpp"
#include "exec/mpi/mpi_runtime.hpp"
#include "exec/runner/trainer.hpp"
#endif
#ifdef MPLAN_HAVE_GPU
// make_cuda_backend(), cuda_device_count() and make_nccl_comm_world() (the CUDA executor).
#include "exec/cuda/cuda_backend.hpp"
#include "exec/cuda/nccl_comm.hpp"
#endif

namespace mplan::cli {
namespace {

inline constexpr int kRunSchemaVersion = 1;

struct RunOptions {
  std::string plan_path;
  int64_t iters = 10;
  int64_t warmup = 2;
  std::optional<int64_t> seed;
  std::string json_path;
  std::string backend;  // "cpu", "cuda" or "" (cuda when built with GPUs and one is present)
};

#ifdef MPLAN_HAVE_EXEC

using namespace mplan::exec;

struct IterationRecord {
  int64_t iteration = 0;
  bool warmup = false;
  double loss = 0, grad_norm = 0, seconds = 0;
  double tokens_per_s = 0, tflops_per_gpu = 0, mfu = 0;
};

struct RankMemory {
  int64_t executor_peak_bytes = 0;
  int64_t device_peak_bytes = -1;
};

struct Setup {
  Plan plan;
  std::string backend;  // "cpu" or "cuda"
  int device = -1;
};

// Every check that must pass before anything is allocated. Throws Error naming the flag/field.
Setup check_run(const RunOptions& o, const ProcessIdentity& id) {
  if (o.iters < 1) throw Error(cat("--iters: must be >= 1, got ", o.iters));
  if (o.warmup < 0 || o.warmup >= o.iters)
    throw Error(cat("--warmup: must be in [0, --iters) = [0, ", o.iters, "), got ", o.warmup));
  if (o.seed && *o.seed < 0) throw Error(cat("--seed: must be >= 0, got ", *o.seed));
  Setup s;
  s.plan = load_plan(o.plan_path);
  require_valid(s.plan);
  check_executable(s.plan);
  if (o.seed) s.plan.training.seed = *o.seed;
  if (id.world_rank == 0 && !o.json_path.empty()) {
    std::ofstream probe(o.json_path, std::ios::app);  // fail now, not after training
    if (!probe) throw Error(cat("--json: cannot write '", o.json_path, "'"));
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
#else
    throw Error(
        "--backend cuda: this mplan was built without the GPU executor (CUDA, cuBLAS, NCCL); "
        "use --backend cpu");
#endif
  }
  return s;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

Json to_json(const RunOptions& o, const Setup& s, const std::vector<IterationRecord>& iters,
             const std::vector<RankMemory>& mem, const std::vector<std::string>& hosts,
             double flops, double median_s, const Json& prediction) {
  const Plan& p = s.plan;
  Json j;
  j["schema_version"] = kRunSchemaVersion;
  j["plan"] = o.plan_path;
  j["model"] = p.model.name;
  j["cluster"] = p.cluster.name;
  j["backend"] = s.backend;
  j["world_size"] = p.world_size();
  j["parallel"] = {{"tp", p.parallel.tp},
                   {"dp", p.parallel.dp},
                   {"pp", p.parallel.pp},
                   {"sequence_parallel", p.parallel.sequence_parallel},
                   {"micro_batch_size", p.parallel.micro_batch_size},
                   {"global_batch_size", p.parallel.global_batch_size}};
  j["precision"] = to_string(p.training.precision);
  j["seed"] = p.training.seed;
  j["warmup_iterations"] = o.warmup;
  j["model_flops_per_iteration"] = flops;
  j["flops_formula"] = "Megatron-LM num_floating_point_operations (dense, no recompute)";
  j["peak_bf16_tflops_per_gpu"] = p.cluster.gpu.peak_bf16_tflops;
  Json list = Json::array();
  for (const auto& r : iters)
    list.push_back({{"iteration", r.iteration},
                    {"warmup", r.warmup},
                    {"loss", r.loss},
                    {"grad_norm", r.grad_norm},
                    {"ms", r.seconds * 1e3},
                    {"tokens_per_s", r.tokens_per_s},
                    {"tflops_per_gpu", r.tflops_per_gpu},
                    {"mfu", r.mfu}});
  j["iterations"] = list;
  double tokens = static_cast<double>(p.parallel.global_batch_size * p.model.seq_length);
  double world = static_cast<double>(p.world_size());
  j["prediction"] = prediction;
  j["summary"] = {{"median_ms", median_s * 1e3},
                  {"tokens_per_s", tokens / median_s},
                  {"tokens_per_s_per_gpu", tokens / median_s / world},
                  {"tflops_per_gpu", flops / median_s / world / 1e12},
                  {"mfu", flops / median_s / world / 1e12 / p.cluster.gpu.peak_bf16_tflops},
                  {"final_loss", iters.back().loss}};
  Json m = Json::array();
  for (size_t r = 0; r < mem.size(); ++r)
    m.push_back({{"rank", r},
                 {"host", hosts[r]},
                 {"executor_peak_bytes", mem[r].executor_peak_bytes},
                 {"device_peak_bytes", mem[r].device_peak_bytes}});
  j["memory"] = m;
  return j;
}

std::vector<std::string> gather_hostnames(const std::string& mine, int size) {
  char buf[64] = {};
  mine.copy(buf, sizeof buf - 1);
  std::vector<char> all(static_cast<size_t>(size) * sizeof buf);
  MPLAN_MPI_CHECK(
      MPI_Gather(buf, sizeof buf, MPI_CHAR, all.data(), sizeof buf, MPI_CHAR, 0, MPI_COMM_WORLD));
  std::vector<std::string> out;
  for (int r = 0; r < size; ++r) out.emplace_back(all.data() + r * sizeof buf);
  return out;
}

// The simulator's prediction for the same plan (no dropout: the executor has none), printed
// beside the measurement with the error in percent; returned for the JSON report.
Json predict(const Plan& plan, double measured_s, const std::vector<RankMemory>& mem) {
  sim::SimOptions so;
  so.dropout = false;
  sim::SimulationResult r;
  try {
    r = sim::simulate(plan, so);
  } catch (const Error& e) {
    std::cout << "prediction: not available for this plan (" << e.what() << ")\n";
    return {{"error", e.what()}};
  }
  int64_t measured_bytes = 0;  // the device's peak where known, else the executor's
  for (const RankMemory& m : mem)
    measured_bytes = std::max(
        measured_bytes, m.device_peak_bytes >= 0 ? m.device_peak_bytes : m.executor_peak_bytes);
  double time_err = (r.iteration_time_s - measured_s) / measured_s;
  double mem_err = measured_bytes > 0 ? static_cast<double>(r.peak_bytes - measured_bytes) /
                                            static_cast<double>(measured_bytes)
                                      : 0.0;
  std::cout << "prediction (mplan simulate, same plan, no dropout): iteration "
            << format_ms(r.iteration_time_s, 1) << " vs measured " << format_ms(measured_s, 1)
            << " (error " << (time_err >= 0 ? "+" : "") << format_percent(time_err, 1)
            << "); peak memory " << format_gib(r.peak_bytes, 2) << " vs measured "
            << format_gib(measured_bytes, 2) << " (error " << (mem_err >= 0 ? "+" : "")
            << format_percent(mem_err, 1) << ")\n";
  return {{"iteration_time_s", r.iteration_time_s},
          {"peak_bytes", r.peak_bytes},
          {"measured_peak_bytes", measured_bytes},
          {"time_error", time_err},
          {"memory_error", mem_err}};
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

  const double flops =
      megatron_flops(plan.model, plan.parallel.global_batch_size, plan.parallel.tp);
  const double world_size = static_cast<double>(plan.world_size());
  const double tokens =
      static_cast<double>(plan.parallel.global_batch_size * plan.model.seq_length);
  const double peak = plan.cluster.gpu.peak_bf16_tflops;
  if (root) {
    std::cout << "mplan run: " << plan.model.name << " on " << plan.world_size() << " rank"
              << (plan.world_size() > 1 ? "s" : "") << " (" << s.backend << " backend, "
              << to_string(plan.training.precision) << "), tp " << plan.parallel.tp << " dp "
              << plan.parallel.dp << (plan.parallel.sequence_parallel ? " sp" : "") << ", "
              << trainer.num_microbatches() << " micro-batch"
              << (trainer.num_microbatches() > 1 ? "es" : "") << " of "
              << plan.parallel.micro_batch_size << " x " << plan.model.seq_length
              << " tokens per rank per iteration\n";
  }
  std::vector<IterationRecord> records;
  backend->reset_peak_memory();
  for (int64_t i = 0; i < o.iters; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    StepResult r = trainer.step();
    backend->synchronize();
    double local_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    double slowest = 0;  // host-side, between iterations: the slowest rank's time
    MPLAN_MPI_CHECK(MPI_Reduce(&local_s, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD));
    IterationRecord rec;
    rec.iteration = i + 1;
    rec.warmup = i < o.warmup;
    rec.loss = r.loss;
    rec.grad_norm = r.grad_norm;
    rec.seconds = root ? slowest : local_s;
    rec.tokens_per_s = tokens / rec.seconds;
    rec.tflops_per_gpu = flops / rec.seconds / world_size / 1e12;
    rec.mfu = rec.tflops_per_gpu / peak;
    records.push_back(rec);
    if (root) {
      std::cout << "iter " << rec.iteration << "/" << o.iters << (rec.warmup ? " (warmup)" : "")
                << "  loss " << format_fixed(rec.loss, 4) << "  grad-norm "
                << format_fixed(rec.grad_norm, 3) << "  " << format_ms(rec.seconds, 1)
                << "  tokens/s " << format_fixed(rec.tokens_per_s, 0) << "  TFLOP/s/GPU "
                << format_fixed(rec.tflops_per_gpu, 2) << "  MFU " << format_percent(rec.mfu, 1)
                << "\n"
                << std::flush;
    }
  }

  MemoryStats ms = backend->memory_stats();
  int64_t mine[2] = {ms.peak_bytes, ms.device_peak_bytes};
  std::vector<int64_t> all(2 * static_cast<size_t>(id.world_size));
  MPLAN_MPI_CHECK(MPI_Gather(mine, 2, MPI_INT64_T, all.data(), 2, MPI_INT64_T, 0, MPI_COMM_WORLD));
  std::vector<std::string> hosts = gather_hostnames(id.hostname, id.world_size);
  if (!root) return;

  std::vector<double> measured;
  for (const auto& r : records)
    if (!r.warmup) measured.push_back(r.seconds);
  double med = median(measured);
  std::cout << "median iteration (" << measured.size() << " after " << o.warmup
            << " warmup): " << format_ms(med, 1) << ", "
            << format_fixed(tokens / med / world_size, 0) << " tokens/s/GPU, "
            << format_fixed(flops / med / world_size / 1e12, 2) << " TFLOP/s/GPU, MFU "
            << format_percent(flops / med / world_size / 1e12 / peak, 1) << " (peak "
            << format_fixed(peak, 1) << " TFLOP/s of " << plan.cluster.gpu.name << ")\n";
  std::vector<RankMemory> mem(static_cast<size_t>(id.world_size));
  Table t({"rank", "host", "executor peak", "device peak"});
  for (int r = 0; r < id.world_size; ++r) {
    mem[static_cast<size_t>(r)] = {all[2 * static_cast<size_t>(r)],
                                   all[2 * static_cast<size_t>(r) + 1]};
    const RankMemory& m = mem[static_cast<size_t>(r)];
    t.add_row({std::to_string(r), hosts[static_cast<size_t>(r)],
               format_gib(m.executor_peak_bytes, 3),
               m.device_peak_bytes < 0 ? "n/a" : format_gib(m.device_peak_bytes, 3)});
  }
  std::cout << "peak memory per rank:\n" << t.render("  ");
  Json prediction = predict(plan, med, mem);
  if (!o.json_path.empty())
    write_text_file(o.json_path,
                    to_json(o, s, records, mem, hosts, flops, med, prediction).dump(2) + "\n",
                    "--json");
}

void run_run(const RunOptions& o) {
  MpiRuntime mpi(nullptr, nullptr);
  const ProcessIdentity& id = mpi.identity();
  // Phase 1: checks on every rank; if any fails, every rank exits 2 and the first failing rank
  // says why (ranks may disagree, e.g. on the GPUs of their host).
  Setup setup;
  std::string error;
  int code = 2;
  try {
    setup = check_run(o, id);
  } catch (const Error& e) {
    error = e.what();
  } catch (const std::exception& e) {
    error = cat("internal error: ", e.what());
    code = 1;
  }
  int failing = error.empty() ? INT_MAX : id.world_rank, first = INT_MAX;
  MPLAN_MPI_CHECK(MPI_Allreduce(&failing, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
  if (first != INT_MAX) {
    if (first == id.world_rank) std::cerr << "mplan: error: " << error << "\n";
    throw ExitWith{first == id.world_rank ? code : 2};
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
  cmd->add_option("plan", opts->plan_path, "Plan JSON file (pp = 1)")->required();
  cmd->add_option("--iters", opts->iters, "Iterations to train, warmup included (default 10)");
  cmd->add_option("--warmup", opts->warmup,
                  "First iterations left out of the median (default 2; < --iters)");
  cmd->add_option("--seed", opts->seed,
                  "Seed of the weights and the synthetic tokens (default: the plan's "
                  "training.seed)");
  cmd->add_option("--json", opts->json_path,
                  "Also write every iteration, the summary and per-rank memory to this file");
  cmd->add_option("--backend", opts->backend,
                  "cpu (reference, MPI ranks on CPU cores) or cuda (one GPU per rank); default: "
                  "cuda when built with GPU support and a GPU is visible, else cpu")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->footer(
      "Per iteration: loss, gradient norm, time (slowest rank), tokens/s, TFLOP/s per GPU and MFU\n"
      "(Megatron's FLOP count; peak from the plan's cluster). At the end: the median iteration\n"
      "time after warmup and each rank's peak memory (executor accounting and the device's).\n"
      "The world size must equal the plan's tp x cp x pp x dp; pipeline plans are refused.\n"
      "Exit status: 0 ok, 2 bad plan or option (nothing allocated), 1 a failure while training.\n"
      "Examples:\n"
      "  mpirun -np 4 mplan run configs/plans/gpt3-1.3b-dp4.json --iters 20 --warmup 5\n"
      "  mpirun -np 2 mplan run configs/plans/tiny-gpt-tp2-sp.json --backend cpu --json run.json\n"
      "  mplan run configs/plans/tiny-gpt.json --backend cpu --iters 3");
  cmd->callback([opts] { run_run(*opts); });
}

MPLAN_REGISTER_COMMAND(70, add_run);

}  // namespace
}  // namespace mplan::cli
