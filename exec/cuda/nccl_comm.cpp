// NCCL communicators for the executor. Construction of NcclCommWorld: rank 0's unique id is
// broadcast over MPI, all ranks join one world communicator, then for each group kind (in the
// sorted order of the map, the same on every rank after an MPI check) ncclCommSplit with
// color = the group's smallest world rank and key = this rank's index in the group, so the NCCL
// rank of each member equals its position in Megatron's member order.
#include "exec/cuda/nccl_comm.hpp"

#include <mpi.h>

#include <algorithm>
#include <cstdlib>

#include "exec/cuda/cuda_check.hpp"

namespace mplan::exec::cuda {
namespace {

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::kF32:
      return ncclFloat32;
    case DType::kBF16:
      return ncclBfloat16;
    case DType::kI32:
      return ncclInt32;
  }
  MPLAN_CHECK(false, "nccl: unsupported dtype");
  return ncclFloat32;
}

}  // namespace

void disable_nvls_unless_set() { setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0); }

NcclComm::NcclComm(ncclComm_t comm, CudaBackend& backend) : comm_(comm), backend_(backend) {
  MPLAN_NCCL_CHECK(ncclCommUserRank(comm_, &rank_));
  MPLAN_NCCL_CHECK(ncclCommCount(comm_, &size_));
}

NcclComm::~NcclComm() {
  if (comm_ != nullptr) {
    backend_.synchronize();  // nothing of ours may still run on this communicator
    ncclCommDestroy(comm_);
  }
}

void NcclComm::all_reduce(Tensor t, ReduceOp op, Stream s) {
  MPLAN_NCCL_CHECK(ncclAllReduce(t.data, t.data, static_cast<size_t>(t.numel()), nccl_type(t.dtype),
                                 op == ReduceOp::kSum ? ncclSum : ncclMax, comm_,
                                 backend_.stream(s)));
}

void NcclComm::all_gather(Tensor send, Tensor recv, Stream s) {
  MPLAN_CHECK(recv.numel() == send.numel() * size_ && recv.dtype == send.dtype, "all_gather: send ",
              send.numel(), " recv ", recv.numel(), " group size ", size_);
  MPLAN_NCCL_CHECK(ncclAllGather(send.data, recv.data, static_cast<size_t>(send.numel()),
                                 nccl_type(send.dtype), comm_, backend_.stream(s)));
}

void NcclComm::reduce_scatter(Tensor send, Tensor recv, Stream s) {
  MPLAN_CHECK(send.numel() == recv.numel() * size_ && recv.dtype == send.dtype,
              "reduce_scatter: send ", send.numel(), " recv ", recv.numel(), " group size ", size_);
  MPLAN_NCCL_CHECK(ncclReduceScatter(send.data, recv.data, static_cast<size_t>(recv.numel()),
                                     nccl_type(send.dtype), ncclSum, comm_, backend_.stream(s)));
}

void NcclComm::broadcast(Tensor t, int root, Stream s) {
  MPLAN_CHECK(root >= 0 && root < size_, "broadcast: root ", root, " group size ", size_);
  MPLAN_NCCL_CHECK(ncclBroadcast(t.data, t.data, static_cast<size_t>(t.numel()), nccl_type(t.dtype),
                                 root, comm_, backend_.stream(s)));
}

void NcclComm::send(Tensor t, int peer, Stream s) {
  MPLAN_CHECK(peer >= 0 && peer < size_, "send: peer ", peer, " group size ", size_);
  MPLAN_NCCL_CHECK(ncclSend(t.data, static_cast<size_t>(t.numel()), nccl_type(t.dtype), peer, comm_,
                            backend_.stream(s)));
}

void NcclComm::recv(Tensor t, int peer, Stream s) {
  MPLAN_CHECK(peer >= 0 && peer < size_, "recv: peer ", peer, " group size ", size_);
  MPLAN_NCCL_CHECK(ncclRecv(t.data, static_cast<size_t>(t.numel()), nccl_type(t.dtype), peer, comm_,
                            backend_.stream(s)));
}

void NcclComm::group_start() { MPLAN_NCCL_CHECK(ncclGroupStart()); }
void NcclComm::group_end() { MPLAN_NCCL_CHECK(ncclGroupEnd()); }

NcclCommWorld::NcclCommWorld(const GroupMembers& groups, CudaBackend& backend) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  MPLAN_CHECK(initialized, "NcclCommWorld needs MPI to be initialized");
  MPLAN_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &world_rank_));
  MPLAN_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &world_size_));

  // Every rank must create the same kinds in the same order, or ncclCommSplit would hang:
  // compare with rank 0's list and agree on the verdict before any NCCL call.
  std::string kinds;
  for (const auto& [kind, members] : groups) kinds += kind + ";";
  int len = static_cast<int>(kinds.size());
  MPLAN_MPI_CHECK(MPI_Bcast(&len, 1, MPI_INT, 0, MPI_COMM_WORLD));
  std::string root_kinds(static_cast<size_t>(len), '\0');
  if (world_rank_ == 0) root_kinds = kinds;
  MPLAN_MPI_CHECK(MPI_Bcast(root_kinds.data(), len, MPI_CHAR, 0, MPI_COMM_WORLD));
  int bad = root_kinds != kinds ? 1 : 0;
  for (const auto& [kind, members] : groups) {
    if (std::find(members.begin(), members.end(), world_rank_) == members.end()) bad = 1;
    for (int r : members)
      if (r < 0 || r >= world_size_) bad = 1;
  }
  int any_bad = 0;
  MPLAN_MPI_CHECK(MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
  MPLAN_CHECK(!any_bad, "NcclCommWorld: ranks disagree on the group kinds (rank 0: '", root_kinds,
              "', rank ", world_rank_, ": '", kinds,
              "'), or a group misses its own rank or names a rank outside the world");

  disable_nvls_unless_set();
  MPLAN_CUDA_CHECK(cudaSetDevice(backend.device()));
  ncclUniqueId id{};
  if (world_rank_ == 0) MPLAN_NCCL_CHECK(ncclGetUniqueId(&id));
  MPLAN_MPI_CHECK(MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD));
  ncclComm_t world = nullptr;
  MPLAN_NCCL_CHECK(ncclCommInitRank(&world, world_size_, id, world_rank_));
  world_ = std::make_unique<NcclComm>(world, backend);

  for (const auto& [kind, members] : groups) {
    const int color = *std::min_element(members.begin(), members.end());
    const int key =
        static_cast<int>(std::find(members.begin(), members.end(), world_rank_) - members.begin());
    ncclComm_t sub = nullptr;
    MPLAN_NCCL_CHECK(ncclCommSplit(world, color, key, &sub, nullptr));
    auto comm = std::make_unique<NcclComm>(sub, backend);
    MPLAN_CHECK(comm->rank() == key && comm->size() == static_cast<int>(members.size()),
                "NcclCommWorld: group '", kind, "' got rank ", comm->rank(), " of ", comm->size(),
                ", expected ", key, " of ", members.size());
    groups_.emplace(kind, std::move(comm));
  }
}

NcclCommWorld::~NcclCommWorld() {
  groups_.clear();  // split communicators before their parent
  world_.reset();
}

Comm& NcclCommWorld::group(const std::string& kind) {
  auto it = groups_.find(kind);
  MPLAN_CHECK(it != groups_.end(), "no communicator for group kind '", kind, "'");
  return *it->second;
}

}  // namespace mplan::exec::cuda

namespace mplan::exec {

std::unique_ptr<CommWorld> make_nccl_comm_world(const GroupMembers& groups, Backend& backend) {
  auto* cuda = dynamic_cast<cuda::CudaBackend*>(&backend);
  MPLAN_CHECK(cuda != nullptr, "the NCCL communicator needs the CUDA backend, got ",
              backend.name());
  return std::make_unique<cuda::NcclCommWorld>(groups, *cuda);
}

}  // namespace mplan::exec
