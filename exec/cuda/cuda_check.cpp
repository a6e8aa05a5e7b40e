// Out-of-line part of the GPU error macros: the message and the job-wide abort.
// Invariant: never returns; with MPI initialized (and not finalized) it calls MPI_Abort on
// MPI_COMM_WORLD so every rank of the job ends, not only this one.
#include "exec/cuda/cuda_check.hpp"

#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace mplan::exec::cuda {

int env_world_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"}) {
    if (const char* v = std::getenv(name)) return std::atoi(v);
  }
  return -1;
}

void gpu_fatal(const char* lib, const char* file, int line, const char* call, const char* message) {
  char host[256] = "?";
  gethostname(host, sizeof(host) - 1);
  std::fprintf(stderr, "[rank %d host %s] %s error at %s:%d: %s: %s\n", env_world_rank(), host, lib,
               file, line, call, message ? message : "(no message)");
  std::fflush(stderr);
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();
}

}  // namespace mplan::exec::cuda
