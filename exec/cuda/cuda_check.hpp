// Check macros of the GPU libraries: a failed CUDA, cuBLAS or NCCL call ends the whole job through
// exec/mpi/fatal.hpp (rank, host, file:line and the library's message, then MPI_Abort), so no peer
// hangs in a collective. A macro needs its library's header only where it is used.
#pragma once

#include <string>

#include "exec/mpi/fatal.hpp"

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
