// MpiComm and MpiCommWorld. Each reduction: an all-to-all hands rank r block r of every member's
// tensor (as f32), rank r folds the blocks in member order 0, 1, ..., n-1, and an all-gather
// returns the reduced blocks to everyone. Fixed order => deterministic and equal on all ranks.
#include "exec/mpi/mpi_comm.hpp"

#include <algorithm>
#include <climits>
#include <cstring>

#include "exec/cpu/bf16.hpp"
#include "exec/mpi/fatal.hpp"

namespace mplan::exec {

namespace {

int to_int(int64_t v, const char* what) {
  MPLAN_CHECK(v >= 0 && v <= INT_MAX, what, " (", v, ") exceeds an MPI count");
  return static_cast<int>(v);
}

void check_float(const Tensor& t, const char* what) {
  MPLAN_CHECK(t.dtype == DType::kF32 || t.dtype == DType::kBF16, what, ": needs f32 or bf16, got ",
              to_string(t.dtype));
}

void to_f32(const Tensor& t, std::vector<float>& out) {
  out.resize(static_cast<size_t>(t.numel()));
  if (t.dtype == DType::kF32) {
    if (!out.empty()) std::memcpy(out.data(), t.data, t.bytes());
  } else {
    const uint16_t* p = t.as<const uint16_t>();
    for (size_t i = 0; i < out.size(); ++i) out[i] = bf16_to_f32(p[i]);
  }
}

void from_f32(const std::vector<float>& in, const Tensor& t) {
  if (t.dtype == DType::kF32) {
    if (!in.empty()) std::memcpy(t.data, in.data(), t.bytes());
  } else {
    uint16_t* p = t.as<uint16_t>();
    for (size_t i = 0; i < in.size(); ++i) p[i] = f32_to_bf16(in[i]);
  }
}

// Folds `count` blocks of `len` floats laid out one after another, in block order.
void fold(const float* blocks, int count, int64_t len, ReduceOp op, float* out) {
  std::copy(blocks, blocks + len, out);
  for (int r = 1; r < count; ++r) {
    const float* b = blocks + r * len;
    if (op == ReduceOp::kSum)
      for (int64_t i = 0; i < len; ++i) out[i] += b[i];
    else
      for (int64_t i = 0; i < len; ++i) out[i] = std::max(out[i], b[i]);
  }
}

}  // namespace

MpiComm::MpiComm(MPI_Comm comm) : comm_(comm) {
  MPLAN_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  MPLAN_MPI_CHECK(MPI_Comm_size(comm_, &size_));
}

MpiComm::~MpiComm() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && comm_ != MPI_COMM_WORLD && comm_ != MPI_COMM_SELF && comm_ != MPI_COMM_NULL)
    MPI_Comm_free(&comm_);
}

void MpiComm::all_reduce(Tensor t, ReduceOp op, Stream) {
  check_float(t, "all_reduce");
  if (size_ == 1) return;
  int64_t n = t.numel();
  std::vector<float> data;
  to_f32(t, data);
  // Block r = elements [n·r/size, n·(r+1)/size).
  std::vector<int> counts(static_cast<size_t>(size_)), displs(static_cast<size_t>(size_));
  for (int r = 0; r < size_; ++r) {
    int64_t b = n * r / size_, e = n * (r + 1) / size_;
    displs[static_cast<size_t>(r)] = to_int(b, "all_reduce offset");
    counts[static_cast<size_t>(r)] = to_int(e - b, "all_reduce block");
  }
  int mine = counts[static_cast<size_t>(rank_)];
  std::vector<float> blocks(static_cast<size_t>(mine) * static_cast<size_t>(size_));
  std::vector<int> rcounts(static_cast<size_t>(size_), mine), rdispls(static_cast<size_t>(size_));
  for (int r = 0; r < size_; ++r) rdispls[static_cast<size_t>(r)] = r * mine;
  MPLAN_MPI_CHECK(MPI_Alltoallv(data.data(), counts.data(), displs.data(), MPI_FLOAT, blocks.data(),
                                rcounts.data(), rdispls.data(), MPI_FLOAT, comm_));
  std::vector<float> reduced(static_cast<size_t>(mine));
  fold(blocks.data(), size_, mine, op, reduced.data());
  MPLAN_MPI_CHECK(MPI_Allgatherv(reduced.data(), mine, MPI_FLOAT, data.data(), counts.data(),
                                 displs.data(), MPI_FLOAT, comm_));
  from_f32(data, t);
}

void MpiComm::all_gather(Tensor send, Tensor recv, Stream) {
  MPLAN_CHECK(send.dtype == recv.dtype, "all_gather: dtypes differ");
  MPLAN_CHECK(recv.numel() == send.numel() * size_, "all_gather: recv has ", recv.numel(),
              " elements, needs ", size_, " x ", send.numel());
  int bytes = to_int(static_cast<int64_t>(send.bytes()), "all_gather bytes");
  // In place when `send` is this rank's block of `recv` (the distributed optimizer's gather).
  const bool in_place =
      static_cast<const char*>(send.data) == static_cast<const char*>(recv.data) + rank_ * bytes;
  MPLAN_MPI_CHECK(MPI_Allgather(in_place ? MPI_IN_PLACE : send.data, bytes, MPI_BYTE, recv.data,
                                bytes, MPI_BYTE, comm_));
}

void MpiComm::reduce_scatter(Tensor send, Tensor recv, Stream) {
  check_float(send, "reduce_scatter send");
  MPLAN_CHECK(send.dtype == recv.dtype, "reduce_scatter: dtypes differ");
  MPLAN_CHECK(send.numel() == recv.numel() * size_, "reduce_scatter: send has ", send.numel(),
              " elements, needs ", size_, " x ", recv.numel());
  int64_t len = recv.numel();
  std::vector<float> data;
  to_f32(send, data);
  std::vector<float> blocks(data.size());
  int count = to_int(len, "reduce_scatter block");
  if (size_ == 1)
    blocks = data;
  else
    MPLAN_MPI_CHECK(
        MPI_Alltoall(data.data(), count, MPI_FLOAT, blocks.data(), count, MPI_FLOAT, comm_));
  std::vector<float> reduced(static_cast<size_t>(len));
  fold(blocks.data(), size_, len, ReduceOp::kSum, reduced.data());
  from_f32(reduced, recv);
}

void MpiComm::broadcast(Tensor t, int root, Stream) {
  MPLAN_CHECK(root >= 0 && root < size_, "broadcast root ", root, " of ", size_);
  int bytes = to_int(static_cast<int64_t>(t.bytes()), "broadcast bytes");
  MPLAN_MPI_CHECK(MPI_Bcast(t.data, bytes, MPI_BYTE, root, comm_));
}

void MpiComm::send(Tensor t, int peer, Stream) {
  MPLAN_CHECK(peer >= 0 && peer < size_ && peer != rank_, "send to group rank ", peer);
  if (in_group_) {
    pending_.push_back({true, t, peer});
    return;
  }
  int bytes = to_int(static_cast<int64_t>(t.bytes()), "send bytes");
  MPLAN_MPI_CHECK(MPI_Send(t.data, bytes, MPI_BYTE, peer, 0, comm_));
}

void MpiComm::recv(Tensor t, int peer, Stream) {
  MPLAN_CHECK(peer >= 0 && peer < size_ && peer != rank_, "recv from group rank ", peer);
  if (in_group_) {
    pending_.push_back({false, t, peer});
    return;
  }
  int bytes = to_int(static_cast<int64_t>(t.bytes()), "recv bytes");
  MPLAN_MPI_CHECK(MPI_Recv(t.data, bytes, MPI_BYTE, peer, 0, comm_, MPI_STATUS_IGNORE));
}

void MpiComm::group_start() {
  MPLAN_CHECK(!in_group_, "group_start inside a group");
  in_group_ = true;
}

void MpiComm::group_end() {
  MPLAN_CHECK(in_group_, "group_end without group_start");
  in_group_ = false;
  std::vector<MPI_Request> reqs(pending_.size());
  for (size_t i = 0; i < pending_.size(); ++i) {
    const P2p& p = pending_[i];
    int bytes = to_int(static_cast<int64_t>(p.t.bytes()), "p2p bytes");
    if (p.is_send)
      MPLAN_MPI_CHECK(MPI_Isend(p.t.data, bytes, MPI_BYTE, p.peer, 0, comm_, &reqs[i]));
    else
      MPLAN_MPI_CHECK(MPI_Irecv(p.t.data, bytes, MPI_BYTE, p.peer, 0, comm_, &reqs[i]));
  }
  pending_.clear();
  if (!reqs.empty())
    MPLAN_MPI_CHECK(MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE));
}

MpiCommWorld::MpiCommWorld(const GroupMembers& groups, MPI_Comm base) {
  MPLAN_MPI_CHECK(MPI_Comm_rank(base, &world_rank_));
  MPLAN_MPI_CHECK(MPI_Comm_size(base, &world_size_));
  // Every rank must split for the same kinds in the same order, or the splits would mismatch.
  int kinds = static_cast<int>(groups.size()), lo = 0, hi = 0;
  MPLAN_MPI_CHECK(MPI_Allreduce(&kinds, &lo, 1, MPI_INT, MPI_MIN, base));
  MPLAN_MPI_CHECK(MPI_Allreduce(&kinds, &hi, 1, MPI_INT, MPI_MAX, base));
  MPLAN_CHECK(lo == hi, "ranks disagree on the number of group kinds (", lo, " vs ", hi, ")");
  for (const auto& [kind, members] : groups) {
    auto it = std::find(members.begin(), members.end(), world_rank_);
    MPLAN_CHECK(it != members.end(), "rank ", world_rank_, " is not a member of its '", kind,
                "' group");
    int key = static_cast<int>(it - members.begin());
    int color = *std::min_element(members.begin(), members.end());
    MPI_Comm comm = MPI_COMM_NULL;
    MPLAN_MPI_CHECK(MPI_Comm_split(base, color, key, &comm));
    auto c = std::make_unique<MpiComm>(comm);
    MPLAN_CHECK(c->size() == static_cast<int>(members.size()) && c->rank() == key, "group '", kind,
                "': MPI made a group of ", c->size(), " with this rank at ", c->rank(),
                "; expected ", members.size(), " and ", key);
    comms_[kind] = std::move(c);
  }
}

Comm& MpiCommWorld::group(const std::string& kind) {
  auto it = comms_.find(kind);
  MPLAN_CHECK(it != comms_.end(), "no communicator of group kind '", kind, "'");
  return *it->second;
}

}  // namespace mplan::exec
