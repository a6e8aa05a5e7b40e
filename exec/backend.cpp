// Out-of-line parts of exec/backend.hpp: dtype sizes and names, and Tensor's shape helpers.
// Invariant: a view never changes the element count or the memory it points to.
#include "exec/backend.hpp"

namespace mplan::exec {

int64_t Backend::attention_groups(const Tensor& qkv, int64_t s, int64_t b, int64_t heads,
                                  int64_t d) {
  const int64_t plane = s * b * d;
  MPLAN_CHECK(plane > 0 && qkv.numel() % plane == 0 && (qkv.numel() / plane - heads) % 2 == 0,
              "attention: qkv must hold (s, b, heads + 2 groups, d) elements; got ", qkv.numel(),
              " for (", s, ", ", b, ", ", heads, ", ", d, ")");
  const int64_t groups = (qkv.numel() / plane - heads) / 2;
  MPLAN_CHECK(groups >= 1 && heads % groups == 0, "attention: ", groups,
              " K/V groups do not divide ", heads, " heads");
  return groups;
}

void Backend::layernorm_backward_add(Tensor dy, Tensor x, Tensor gamma, Tensor mean, Tensor rstd,
                                     Tensor dx, Tensor dgamma, Tensor dbeta, Tensor dres,
                                     Tensor dres_colsum) {
  if (dres_colsum.data != nullptr) bias_grad_accumulate(dres, dres_colsum);
  layernorm_backward(dy, x, gamma, mean, rstd, dx, dgamma, dbeta);
  add(dres, dres, dx);
}

void Backend::rmsnorm_backward_add(Tensor dy, Tensor x, Tensor gamma, Tensor rstd, Tensor dx,
                                   Tensor dgamma, Tensor dres, Tensor dres_colsum) {
  if (dres_colsum.data != nullptr) bias_grad_accumulate(dres, dres_colsum);
  rmsnorm_backward(dy, x, gamma, rstd, dx, dgamma);
  add(dres, dres, dx);
}

size_t dtype_size(DType t) {
  switch (t) {
    case DType::kF32:
      return 4;
    case DType::kBF16:
      return 2;
    case DType::kI32:
      return 4;
  }
  MPLAN_CHECK(false, "unknown dtype ", static_cast<int>(t));
  return 0;
}

const char* to_string(DType t) {
  switch (t) {
    case DType::kF32:
      return "f32";
    case DType::kBF16:
      return "bf16";
    case DType::kI32:
      return "i32";
  }
  return "?";
}

int64_t Tensor::numel() const {
  if (ndim == 0) return 0;
  int64_t n = 1;
  for (int i = 0; i < ndim; ++i) n *= shape[static_cast<size_t>(i)];
  return n;
}

namespace {
void set_shape(Tensor& t, std::initializer_list<int64_t> shape) {
  MPLAN_CHECK(shape.size() >= 1 && shape.size() <= 4, "a tensor has 1 to 4 dims, got ",
              shape.size());
  t.shape = {0, 0, 0, 0};
  t.ndim = static_cast<int>(shape.size());
  size_t i = 0;
  for (int64_t d : shape) {
    MPLAN_CHECK(d >= 0, "negative dim ", d);
    t.shape[i++] = d;
  }
}
}  // namespace

Tensor Tensor::view(std::initializer_list<int64_t> new_shape) const {
  Tensor t = *this;
  set_shape(t, new_shape);
  MPLAN_CHECK(t.numel() == numel(), "view changes the element count: ", numel(), " -> ", t.numel());
  return t;
}

Tensor Tensor::rows_slice(int64_t row_begin, int64_t n) const {
  MPLAN_CHECK(row_begin >= 0 && n >= 0 && row_begin + n <= rows(), "rows [", row_begin, ", ",
              row_begin + n, ") of ", rows());
  Tensor t = *this;
  t.data = static_cast<char*>(data) + static_cast<size_t>(row_begin * cols()) * dtype_size(dtype);
  if (ndim == 1) {
    t.shape[0] = n;
  } else {
    // Keep the trailing dims when the slice is whole rows of the leading dim; otherwise 2-D.
    int64_t inner = rows() / shape[0];
    if (inner > 0 && row_begin % inner == 0 && n % inner == 0) {
      t.shape[0] = n / inner;
    } else {
      t.ndim = 2;
      t.shape = {n, cols(), 0, 0};
    }
  }
  return t;
}

Tensor Tensor::flat_slice(int64_t offset, int64_t n) const {
  MPLAN_CHECK(offset >= 0 && n >= 0 && offset + n <= numel(), "elements [", offset, ", ",
              offset + n, ") of ", numel());
  Tensor t = *this;
  t.data = static_cast<char*>(data) + static_cast<size_t>(offset) * dtype_size(dtype);
  t.ndim = 1;
  t.shape = {n, 0, 0, 0};
  return t;
}

Tensor make_tensor(void* data, DType dtype, std::initializer_list<int64_t> shape) {
  Tensor t;
  t.data = data;
  t.dtype = dtype;
  set_shape(t, shape);
  return t;
}

}  // namespace mplan::exec
