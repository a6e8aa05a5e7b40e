// Fatal errors of the runtime tier: a call to MPI (or, through exec/cuda/cuda_check.hpp, to
// CUDA, cuBLAS or NCCL) failed. fatal_abort() prints "mplan: fatal: rank R on HOST: file:line:
// what" and calls MPI_Abort, so every peer ends instead of hanging in a collective.
#pragma once

#include <string>

#include "src/common/error.hpp"

namespace mplan::exec {

[[noreturn]] void fatal_abort(const char* file, int line, const std::string& what);

// The text of an MPI error code.
std::string mpi_error_string(int code);

}  // namespace mplan::exec

#define MPLAN_FATAL(...) ::mplan::exec::fatal_abort(__FILE__, __LINE__, ::mplan::cat(__VA_ARGS__))

#define MPLAN_MPI_CHECK(call)                                                                 \
  do {                                                                                        \
    int mplan_mpi_rc_ = (call);                                                               \
    if (mplan_mpi_rc_ != MPI_SUCCESS)                                                         \
      ::mplan::exec::fatal_abort(                                                             \
          __FILE__, __LINE__,                                                                 \
          std::string(#call) + " failed: " + ::mplan::exec::mpi_error_string(mplan_mpi_rc_)); \
  } while (0)
