// `mplan calibrate --out PROFILE.json [--quick] [--base B] [--model M]...`: measures the GPUs
// (exec/calibrate) and writes a cluster profile: the base profile with the measured fields
// replaced and the raw measurements under "calibration". Run under mpirun, one rank per GPU of
// one host: rank 0 measures compute, every rank the NCCL part (skipped with one rank, which keeps
// the base profile's link curves). A failed measurement ends the job (exit 1, or an abort with
// rank and file:line from the CUDA/NCCL/MPI checks); the profile is then not written.
#include <climits>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

#include "cli/command_registry.hpp"
#include "src/common/embedded_configs.hpp"
#include "src/common/error.hpp"
#include "src/model/model_spec.hpp"
#include "src/plan/cluster_spec.hpp"
#include "src/plan/plan.hpp"

#ifdef MPLAN_HAVE_GPU
#include <mpi.h>

#include "exec/calibrate/calibration_profile.hpp"
#include "exec/calibrate/calibration_shapes.hpp"
#include "exec/calibrate/cuda/gpu_calibration.hpp"
#include "exec/cuda/cuda_backend.hpp"
#include "exec/cuda/cuda_check.hpp"
#include "exec/mpi/mpi_runtime.hpp"
#endif

namespace mplan::cli {
namespace {

struct CalibrateOptions {
  std::string out;
  std::string base;
  std::string name;
  std::vector<std::string> models;
  std::vector<std::string> plans;
  bool quick = false;
  bool no_sustained_scale = false;
  double heat_ms = 0;
};

#ifdef MPLAN_HAVE_GPU

using namespace mplan::exec;
using namespace mplan::exec::calibrate;

struct Setup {
  std::vector<ModelSpec> models;
  CalibrationSettings settings;
  int device = 0;
};

Setup check_setup(const CalibrateOptions& o, const ProcessIdentity& id) {
  if (o.out.empty()) throw Error("--out: the profile file to write is required");
  Setup s;
  std::vector<std::string> refs = o.models;
  if (refs.empty())
    refs = o.quick ? std::vector<std::string>{"gpt3-1.3b", "llama3.2-1b"}
                   : std::vector<std::string>{"gpt3-1.3b", "llama3.2-1b", "llama3-8b"};
  for (const std::string& r : refs) s.models.push_back(load_model(r, "--model"));
  s.settings = calibration_settings(o.quick, s.models);
  s.settings.heat_ms = o.heat_ms;
  for (const std::string& path : o.plans) {
    const Plan plan = load_plan(path);
    add_plan_shapes(s.settings, plan.model, plan.parallel.micro_batch_size, plan.parallel.tp);
  }
  const int devices = cuda_device_count();
  if (devices == 0) throw Error("calibrate: no CUDA device is visible on host " + id.hostname);
  if (id.local_size > devices)
    throw Error(cat("calibrate: ", id.local_size, " ranks run on host ", id.hostname,
                    " but it has ", devices, " GPU", devices == 1 ? "" : "s",
                    " (one GPU per rank)"));
  if (id.world_size > 1 && id.local_size != id.world_size)
    throw Error(cat("calibrate: the NCCL part measures the links inside one node, but the ",
                    id.world_size, " ranks span several hosts; start them all on one host"));
  s.device = id.local_rank;
  const std::filesystem::path dir = std::filesystem::absolute(o.out).parent_path();
  if (!std::filesystem::is_directory(dir))
    throw Error(cat("--out: the folder '", dir.string(), "' does not exist"));
  return s;
}

void run_calibrate(const CalibrateOptions& o) {
  MpiRuntime mpi(nullptr, nullptr);
  const ProcessIdentity& id = mpi.identity();
  Setup setup;
  Json base;
  std::string base_ref = o.base, error;
  try {
    setup = check_setup(o, id);
  } catch (const Error& e) {
    error = e.what();
  }
  // Every rank learns whether any failed; the first failing rank says why (exit 2).
  auto agree = [&](int code) {
    int failing = error.empty() ? INT_MAX : id.world_rank, first = INT_MAX;
    MPLAN_MPI_CHECK(MPI_Allreduce(&failing, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    if (first != INT_MAX) {
      if (first == id.world_rank) std::cerr << "mplan: error: " << error << "\n";
      throw ExitWith{code};
    }
  };
  agree(2);
  cuda::CudaBackend gpu(setup.device);
  Measurements m;
  m.env = gpu_environment(setup.device, id.hostname);
  m.env.ranks = id.world_size;
  m.env.quick = o.quick;
  m.env.heat_ms = setup.settings.heat_ms;
  for (const ModelSpec& md : setup.models) m.env.models.push_back(md.name);
  if (id.world_rank == 0) {
    try {
      if (base_ref.empty()) base_ref = base_preset_for_gpu(m.env.gpu_name);
      base = parse_json(load_config_text("clusters", base_ref, "--base"), base_ref);
      cluster_from_json(base, base_ref);  // the base must be a profile the simulator reads
    } catch (const Error& e) {
      error = e.what();
    }
  }
  agree(2);
  std::ostream& log = std::cout;
  if (id.world_rank == 0) {
    log << "mplan calibrate" << (o.quick ? " --quick" : "") << " on " << m.env.gpu_name << " ("
        << id.hostname << "), " << id.world_size << " rank(s); base profile " << base_ref << "\n"
        << "  " << setup.settings.gemms.size() << " GEMM shapes, "
        << setup.settings.attention.size() << " attention shapes, "
        << setup.settings.memory_rows.size() << " sizes of 21 memory-bound kinds\n"
        << std::flush;
    measure_compute(gpu, setup.settings, m, log);
  }
  MPLAN_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
  if (id.world_size > 1) {
    ncclComm_t comm = make_world_nccl(id.world_rank, id.world_size);
    measure_nccl(gpu, comm, id.world_rank, id.world_size, setup.settings, m, log);
    MPLAN_NCCL_CHECK(ncclCommDestroy(comm));
  } else {
    m.nccl_skipped =
        "one rank: NCCL collectives need 2 or more (mpirun -np N mplan calibrate); the base "
        "profile's intra_node curves and latency are kept";
  }
  if (id.world_rank != 0) return;
  ProfileOptions po;
  po.name = o.name;
  po.base_ref = base_ref;
  po.sustained_scale = !o.no_sustained_scale;
  const double peak = base["gpu"]["peak_bf16_tflops"].get<double>();
  const double hbm = base["gpu"]["hbm_bandwidth_gbps"].get<double>();
  const std::vector<std::string> bad = implausible_measurements(m, peak, hbm);
  if (!bad.empty()) {
    std::cerr << "mplan: calibrate: " << bad.size() << " implausible measurement"
              << (bad.size() > 1 ? "s" : "") << " (the timing is broken; no profile written):\n";
    for (const std::string& b : bad) std::cerr << "  " << b << "\n";
    throw ExitWith{1};
  }
  const Json profile = build_profile(base, m, po);
  {
    std::ofstream f(o.out);
    f << profile.dump(2) << "\n";
    if (!f) throw Error(cat("--out: cannot write '", o.out, "'"));
  }
  std::cout << "\n" << summary_table(profile) << "profile written to " << o.out << "\n";
  // The simulator must read what was written; say so loudly when it does not.
  try {
    cluster_from_json(parse_json(read_text_file(o.out, "--out"), o.out), o.out);
  } catch (const Error& e) {
    std::cerr << "mplan: calibrate: the simulator refuses the profile written to " << o.out << ": "
              << e.what() << "\n";
    throw ExitWith{1};
  }
}

#else

void run_calibrate(const CalibrateOptions&) {
  throw Error(
      "calibrate: this mplan was built without the GPU executor (CUDA, cuBLAS, NCCL, MPI); "
      "build with -DMPLAN_WITH_GPU=ON on a GPU host");
}

#endif

void add_calibrate(CLI::App& app) {
  auto opts = std::make_shared<CalibrateOptions>();
  auto* cmd = app.add_subcommand(
      "calibrate",
      "Measure the GPUs (GEMMs, attention, memory-bound kernels, overheads, NCCL) and write a "
      "cluster profile");
  cmd->add_option("--out", opts->out, "Cluster profile JSON to write")->required();
  cmd->add_flag("--quick", opts->quick,
                "Fewer shapes, sizes and repeats: under a minute (full: under 5 minutes)");
  cmd->add_option("--base", opts->base,
                  "Profile whose unmeasured fields are kept: a cluster preset or JSON file "
                  "(default: the preset whose gpu.name matches the GPU)");
  cmd->add_option("--model", opts->models,
                  "Model preset or JSON file whose linear layers give the GEMM shapes; repeat for "
                  "several (default: gpt3-1.3b and llama3.2-1b, plus llama3-8b in full mode)");
  cmd->add_option("--plan", opts->plans,
                  "A plan whose own GEMM and attention shapes (its model at its micro-batch size "
                  "and tp) are measured too; repeat for several");
  cmd->add_option("--name", opts->name, "The profile's name (default: the base profile's)");
  cmd->add_option("--heat-ms", opts->heat_ms,
                  "Milliseconds of 8192^3 GEMMs run before each GEMM and attention shape is "
                  "timed, so that it runs at the clock a GEMM-only load holds under the power "
                  "limit (0 to 1000; default 0: as the timed calls come)");
  cmd->add_flag("--no-sustained-scale", opts->no_sustained_scale,
                "Do not scale the compute efficiencies by the clock ratio under sustained load");
  cmd->footer(
      "Rank 0 measures compute on its GPU; with 2 or more ranks (one host, one GPU each) every\n"
      "rank joins the NCCL part; with one rank it is skipped and the base profile's link curves\n"
      "are kept. Exit status: 0 written; 1 a measurement failed or the result is implausible;\n"
      "2 bad options, no GPU, or a build without the GPU executor.\n"
      "Examples:\n"
      "  mplan calibrate --quick --out h200.json\n"
      "  mpirun -np 2 mplan calibrate --out h200.json --base configs/clusters/dgx-h200.json\n"
      "  mplan calibrate --out h100.json --model gpt3-1.3b --model llama3-8b\n"
      "  mplan calibrate --out h200.json --plan configs/plans/accuracy/gpt-mbs8-full.json\n"
      "Details: docs/cli/calibrate.md");
  cmd->callback([opts] {
    if (!(opts->heat_ms >= 0 && opts->heat_ms <= 1000))
      throw Error(cat("--heat-ms: ", opts->heat_ms, " is not between 0 and 1000 milliseconds"));
    run_calibrate(*opts);
  });
}

MPLAN_REGISTER_COMMAND(60, add_calibrate);

}  // namespace
}  // namespace mplan::cli
