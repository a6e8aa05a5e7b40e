// Third error tier of the design: a failed CUDA, cuBLAS or NCCL call prints the rank, the host,
// file:line, the call and the library's message, then aborts the whole job (MPI_Abort when MPI
// is up, else abort()) so that no peer waits forever on a collective this rank will never join.
// Every call into those libraries goes through one of these macros; kernel launches are followed
// by MPLAN_CUDA_LAUNCH_CHECK().
#pragma once

namespace mplan::exec::cuda {

// Prints "[rank R host H] <lib> error at file:line: <call>: <message>" to stderr and aborts.
[[noreturn]] void gpu_fatal(const char* lib, const char* file, int line, const char* call,
                            const char* message);

// This process's rank for messages: OMPI_COMM_WORLD_RANK, PMI_RANK or SLURM_PROCID; -1 if none.
int env_world_rank();

}  // namespace mplan::exec::cuda

#define MPLAN_CUDA_CHECK(call)                                          \
  do {                                                                  \
    cudaError_t mplan_err_ = (call);                                    \
    if (mplan_err_ != cudaSuccess)                                      \
      ::mplan::exec::cuda::gpu_fatal("CUDA", __FILE__, __LINE__, #call, \
                                     cudaGetErrorString(mplan_err_));   \
  } while (0)

// After a <<<>>> launch: catches bad launch configurations at once (execution errors surface at
// the next synchronizing call, which is checked too).
#define MPLAN_CUDA_LAUNCH_CHECK() MPLAN_CUDA_CHECK(cudaGetLastError())

#define MPLAN_CUBLAS_CHECK(call)                                          \
  do {                                                                    \
    cublasStatus_t mplan_st_ = (call);                                    \
    if (mplan_st_ != CUBLAS_STATUS_SUCCESS)                               \
      ::mplan::exec::cuda::gpu_fatal("cuBLAS", __FILE__, __LINE__, #call, \
                                     cublasGetStatusString(mplan_st_));   \
  } while (0)

#define MPLAN_NCCL_CHECK(call)                                          \
  do {                                                                  \
    ncclResult_t mplan_nr_ = (call);                                    \
    if (mplan_nr_ != ncclSuccess)                                       \
      ::mplan::exec::cuda::gpu_fatal("NCCL", __FILE__, __LINE__, #call, \
                                     ncclGetErrorString(mplan_nr_));    \
  } while (0)
