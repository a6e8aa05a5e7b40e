// Test helpers for the executor: host tensors from the CPU backend filled from std::vector,
// a size-1 Comm for single-process model tests, and closeness checks that report the worst
// element (index, got, expected) so a failing numeric test says where it failed.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "exec/backend.hpp"
#include "exec/comm.hpp"
#include "exec/cpu/bf16.hpp"
#include "exec/host_values.hpp"

namespace mplan::exec::testing {

// Uploads `v` as a tensor of `dtype` (bf16 rounded to nearest even) on `be`.
inline Tensor make(Backend& be, DType dtype, std::initializer_list<int64_t> shape,
                   const std::vector<float>& v) {
  Tensor t = be.alloc(dtype, shape, "test");
  EXPECT_EQ(static_cast<size_t>(t.numel()), v.size());
  upload_values(be, t, v);
  return t;
}

// t's elements as f32.
inline std::vector<float> read(Backend& be, Tensor t) { return download_values(be, t); }

// Values as a bf16 tensor would hold them (identity for f32).
inline std::vector<float> rounded(const std::vector<float>& v, DType dtype) {
  if (dtype != DType::kBF16) return v;
  std::vector<float> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) r[i] = round_to_bf16(v[i]);
  return r;
}

inline std::vector<float> randn(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

// |got - want| <= atol + rtol·|want| everywhere; on failure names the worst element.
template <class A, class B>
::testing::AssertionResult all_close(const std::vector<A>& got, const std::vector<B>& want,
                                     double rtol, double atol) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << "sizes differ: " << got.size() << " vs " << want.size();
  double worst = -1;
  size_t at = 0;
  bool ok = true;
  for (size_t i = 0; i < got.size(); ++i) {
    double g = static_cast<double>(got[i]), w = static_cast<double>(want[i]);
    double excess = std::abs(g - w) - (atol + rtol * std::abs(w));
    if (!(excess <= 0)) ok = false;  // also catches NaN
    if (std::isnan(excess) || excess > worst) {
      worst = std::isnan(excess) ? INFINITY : excess;
      at = i;
    }
  }
  if (ok) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "worst element " << at << " of " << got.size() << ": got " << got[at] << ", expected "
         << want[at] << " (rtol " << rtol << ", atol " << atol << ")";
}

// A communicator of one rank: collectives are identities (tests of a single, unsplit model).
class SoloComm final : public Comm {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void all_reduce(Tensor, ReduceOp, Stream) override {}
  void all_gather(Tensor send, Tensor recv, Stream) override {
    if (send.data != recv.data) std::memcpy(recv.data, send.data, send.bytes());
  }
  void reduce_scatter(Tensor send, Tensor recv, Stream) override {
    if (send.data != recv.data) std::memcpy(recv.data, send.data, send.bytes());
  }
  void broadcast(Tensor, int, Stream) override {}
  void send(Tensor, int, Stream) override { ADD_FAILURE() << "send in a group of one"; }
  void recv(Tensor, int, Stream) override { ADD_FAILURE() << "recv in a group of one"; }
  void group_start() override {}
  void group_end() override {}
};

}  // namespace mplan::exec::testing
