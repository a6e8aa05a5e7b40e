// fatal_abort(): the one place a broken runtime ends the whole job. It asks MPI (not a global)
// for this process's rank, so it works before and after the runtime is set up.
#include "exec/mpi/fatal.hpp"

#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace mplan::exec {

std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<size_t>(len));
}

void fatal_abort(const char* file, int line, const std::string& what) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  bool mpi_up = initialized && !finalized;
  int rank = -1;
  if (mpi_up) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  char host[256] = "?";
  gethostname(host, sizeof host - 1);
  std::fprintf(stderr, "mplan: fatal: rank %d on %s: %s:%d: %s\n", rank, host, file, line,
               what.c_str());
  std::fflush(stderr);
  if (mpi_up) MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();
}

}  // namespace mplan::exec
