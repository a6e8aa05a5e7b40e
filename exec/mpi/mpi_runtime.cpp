// MpiRuntime: init/finalize and this process's rank, host-local rank and host name.
#include "exec/mpi/mpi_runtime.hpp"

#include <mpi.h>
#include <unistd.h>

#include "exec/mpi/fatal.hpp"

namespace mplan::exec {

MpiRuntime::MpiRuntime(int* argc, char*** argv) {
  int initialized = 0;
  MPLAN_MPI_CHECK(MPI_Initialized(&initialized));
  if (!initialized) {
    int provided = 0;
    // One host thread issues every MPI call, but a CUDA backend may run helper threads.
    MPLAN_MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided));
    owns_ = true;
  }
  MPLAN_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  id_ = query_identity();
}

MpiRuntime::~MpiRuntime() {
  if (!owns_) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

ProcessIdentity query_identity() {
  ProcessIdentity id;
  MPLAN_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &id.world_rank));
  MPLAN_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &id.world_size));
  MPI_Comm local = MPI_COMM_NULL;
  MPLAN_MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, id.world_rank,
                                      MPI_INFO_NULL, &local));
  MPLAN_MPI_CHECK(MPI_Comm_rank(local, &id.local_rank));
  MPLAN_MPI_CHECK(MPI_Comm_size(local, &id.local_size));
  MPLAN_MPI_CHECK(MPI_Comm_free(&local));
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  id.hostname = host[0] ? host : "?";
  return id;
}

}  // namespace mplan::exec
