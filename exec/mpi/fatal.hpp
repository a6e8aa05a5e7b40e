// Fatal errors of the runtime tier: an MPI, CUDA, cuBLAS or NCCL call failed. fatal_abort()
// prints "mplan: fatal: rank R on HOST: file:line: what" and calls MPI_Abort, so every peer ends
// instead of hanging in a collective. The check macros wrap calls of each library; a macro only
// needs its library's header where it is used.
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

#define MPLAN_CUDA_CHECK(call)                                                    \
  do {                                                                            \
    cudaError_t mplan_cuda_rc_ = (call);                                          \
    if (mplan_cuda_rc_ != cudaSuccess)                                            \
      ::mplan::exec::fatal_abort(                                                 \
          __FILE__, __LINE__,                                                     \
          std::string(#call) + " failed: " + cudaGetErrorString(mplan_cuda_rc_)); \
  } while (0)

#define MPLAN_CUBLAS_CHECK(call)                                                       \
  do {                                                                                 \
    cublasStatus_t mplan_cublas_rc_ = (call);                                          \
    if (mplan_cublas_rc_ != CUBLAS_STATUS_SUCCESS)                                     \
      ::mplan::exec::fatal_abort(                                                      \
          __FILE__, __LINE__,                                                          \
          std::string(#call) + " failed: " + cublasGetStatusString(mplan_cublas_rc_)); \
  } while (0)

#define MPLAN_NCCL_CHECK(call)                                                    \
  do {                                                                            \
    ncclResult_t mplan_nccl_rc_ = (call);                                         \
    if (mplan_nccl_rc_ != ncclSuccess)                                            \
      ::mplan::exec::fatal_abort(                                                 \
          __FILE__, __LINE__,                                                     \
          std::string(#call) + " failed: " + ncclGetErrorString(mplan_nccl_rc_)); \
  } while (0)
