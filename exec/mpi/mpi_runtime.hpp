// MpiRuntime: MPI for the lifetime of one object (RAII). It initializes MPI unless someone already
// did (then it leaves finalization to them), makes MPI errors return codes (so MPLAN_MPI_CHECK
// reports rank, host and file:line before aborting), and reads this process's identity.
#pragma once

#include <string>

namespace mplan::exec {

struct ProcessIdentity {
  int world_rank = 0;
  int world_size = 1;
  int local_rank = 0;  // index among the ranks of this host (picks the GPU)
  int local_size = 1;  // ranks on this host
  std::string hostname;
};

class MpiRuntime {
 public:
  MpiRuntime(int* argc, char*** argv);
  ~MpiRuntime();
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;

  const ProcessIdentity& identity() const { return id_; }

 private:
  bool owns_ = false;
  ProcessIdentity id_;
};

// Rank, size and host name; local rank and size from MPI_Comm_split_type(MPI_COMM_TYPE_SHARED):
// what OMPI_COMM_WORLD_LOCAL_RANK or SLURM_LOCALID say, under any launcher.
ProcessIdentity query_identity();

}  // namespace mplan::exec
