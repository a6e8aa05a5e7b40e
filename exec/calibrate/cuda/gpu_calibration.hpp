// The measuring half of `mplan calibrate`, on CUDA devices: compute on one GPU (cuBLASLt GEMMs of
// the settings' shapes, the attention kernels, the memory-bound kernels by kind, launch and host
// overhead, the clock under sustained load) and NCCL between the ranks of one host (all-reduce,
// all-gather, reduce-scatter, all-to-all, send/recv; a GEMM beside an all-reduce). Everything is
// timed with CUDA events or after a stream synchronize; any CUDA, cuBLAS, NCCL or MPI failure
// aborts the job with rank, host and file:line (exec/cuda/cuda_check.hpp), and a time that is not
// positive and finite is a fatal error too: nothing is recorded from a broken measurement.
#pragma once

#include <nccl.h>

#include <ostream>

#include "exec/calibrate/calibration_profile.hpp"
#include "exec/calibrate/calibration_shapes.hpp"
#include "exec/cuda/cuda_backend.hpp"

namespace mplan::exec::calibrate {

// Date, GPU name, driver, CUDA runtime and driver versions, NCCL version, host of `device`.
Environment gpu_environment(int device, const std::string& host);

// The compute part on `g`'s device; appends to m.gemms, m.attention, m.memory_bound and sets
// m.overhead and m.sustained. Progress lines go to `log`.
void measure_compute(cuda::CudaBackend& g, const CalibrationSettings& s, Measurements& m,
                     std::ostream& log);

// A NCCL communicator over MPI_COMM_WORLD (MPI initialized; `g`'s device current).
ncclComm_t make_world_nccl(int rank, int ranks);

// The NCCL part: every rank of `comm` calls it with the same settings; sets m.collectives (the
// slowest rank's median time per call) and m.overlap (rank 0's GEMM beside all-reduces).
void measure_nccl(cuda::CudaBackend& g, ncclComm_t comm, int rank, int ranks,
                  const CalibrationSettings& s, Measurements& m, std::ostream& log);

}  // namespace mplan::exec::calibrate
