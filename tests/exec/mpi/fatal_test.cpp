// fatal_abort(): prints rank, host, file:line and the reason, then ends the process (outside MPI
// it aborts; under MPI it calls MPI_Abort, which ends every rank).
#include "exec/mpi/fatal.hpp"

#include <gtest/gtest.h>

namespace mplan::exec {
namespace {

TEST(FatalDeathTest, PrintsWhereAndWhyThenAborts) {
  EXPECT_DEATH(MPLAN_FATAL("NCCL said ", 42),
               "mplan: fatal: rank -1 on .*: .*fatal_test.cpp:[0-9]+: NCCL said 42");
}

}  // namespace
}  // namespace mplan::exec
