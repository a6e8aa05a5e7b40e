// exec/backend.cpp: dtype sizes and names, and Tensor's shape helpers (views keep the memory and
// the element count; row slices of whole leading rows keep the trailing dims).
#include "exec/backend.hpp"

#include <gtest/gtest.h>

namespace mplan::exec {
namespace {

TEST(Tensor, DtypeSizesAndNames) {
  EXPECT_EQ(dtype_size(DType::kF32), 4u);
  EXPECT_EQ(dtype_size(DType::kBF16), 2u);
  EXPECT_EQ(dtype_size(DType::kI32), 4u);
  EXPECT_STREQ(to_string(DType::kBF16), "bf16");
}

TEST(Tensor, ViewsAndSlices) {
  std::vector<float> mem(24);
  Tensor t = make_tensor(mem.data(), DType::kF32, {4, 3, 2});
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.bytes(), 96u);
  EXPECT_EQ(t.rows(), 12);
  EXPECT_EQ(t.cols(), 2);
  Tensor r = t.rows_slice(6, 6);  // rows 6..11 = leading index 2..3
  EXPECT_EQ(r.ndim, 3);
  EXPECT_EQ(r.dim(0), 2);
  EXPECT_EQ(r.as<float>(), mem.data() + 12);
  Tensor odd = t.rows_slice(1, 2);  // not whole leading rows: a (2, 2) matrix
  EXPECT_EQ(odd.ndim, 2);
  EXPECT_EQ(odd.dim(0), 2);
  EXPECT_EQ(odd.as<float>(), mem.data() + 2);
  Tensor f = t.flat_slice(5, 7);
  EXPECT_EQ(f.ndim, 1);
  EXPECT_EQ(f.as<float>(), mem.data() + 5);
  EXPECT_EQ(t.view({6, 4}).dim(1), 4);
  EXPECT_THROW(t.view({5, 5}), InternalError);
  EXPECT_THROW(t.flat_slice(20, 5), InternalError);
  EXPECT_THROW(t.rows_slice(11, 2), InternalError);
  EXPECT_EQ(Tensor{}.numel(), 0);
}

}  // namespace
}  // namespace mplan::exec
