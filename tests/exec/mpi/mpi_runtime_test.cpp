// MpiRuntime / query_identity under mpirun: ranks, host-local ranks and the host name agree with
// what MPI itself says (all ranks of a CI run share one host).
#include "exec/mpi/mpi_runtime.hpp"

#include <gtest/gtest.h>
#include <mpi.h>

#include <set>

namespace mplan::exec {
namespace {

TEST(MpiRuntime, IdentityMatchesMpi) {
  ProcessIdentity id = query_identity();
  int rank = -1, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  EXPECT_EQ(id.world_rank, rank);
  EXPECT_EQ(id.world_size, size);
  EXPECT_FALSE(id.hostname.empty());
  // One host: the local ranks are exactly 0..size-1.
  EXPECT_EQ(id.local_size, size);
  std::vector<int> locals(static_cast<size_t>(size));
  MPI_Allgather(&id.local_rank, 1, MPI_INT, locals.data(), 1, MPI_INT, MPI_COMM_WORLD);
  EXPECT_EQ(std::set<int>(locals.begin(), locals.end()).size(), static_cast<size_t>(size));
  EXPECT_EQ(*std::max_element(locals.begin(), locals.end()), size - 1);
}

TEST(MpiRuntime, NestedRuntimeLeavesMpiInitialized) {
  {
    int argc = 0;
    char** argv = nullptr;
    MpiRuntime inner(&argc, &argv);  // MPI is up already: does not own it
    EXPECT_EQ(inner.identity().world_rank, query_identity().world_rank);
  }
  int finalized = 1;
  MPI_Finalized(&finalized);
  EXPECT_EQ(finalized, 0);
}

}  // namespace
}  // namespace mplan::exec
