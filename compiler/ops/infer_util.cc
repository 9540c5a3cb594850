// SPDX-License-Identifier: Apache-2.0
// Shared inference helpers.
#include "compiler/ops/infer_util.h"

#include <algorithm>

namespace kiln::compiler {

InferResult same_as_input(const InferContext& ctx, int i) {
  KILN_RETURN_IF_ERROR(ctx.require_input(i));
  return std::vector<ValueType>{ctx.input(i)};
}

Result<TensorType> broadcast_types(const InferContext& ctx, const TensorType& a,
                                   const TensorType& b) {
  if (!a.has_rank() || !b.has_rank()) return TensorType::unranked(a.dtype);
  const int rank = std::max(a.rank(), b.rank());
  std::vector<Dim> out(static_cast<size_t>(rank));
  for (int i = 0; i < rank; ++i) {
    int ia = i - (rank - a.rank());
    int ib = i - (rank - b.rank());
    Dim da = ia >= 0 ? (*a.dims)[static_cast<size_t>(ia)] : Dim(1);
    Dim db = ib >= 0 ? (*b.dims)[static_cast<size_t>(ib)] : Dim(1);
    Dim& o = out[static_cast<size_t>(i)];
    if (da.known() && db.known()) {
      if (da.value != db.value && da.value != 1 && db.value != 1) {
        return ctx.errorf("shapes {} and {} do not broadcast", a.to_string(), b.to_string());
      }
      o = Dim(da.value == 1 ? db.value : da.value);
    } else if (da.known()) {
      o = da.value == 1 ? db : da;
    } else if (db.known()) {
      o = db.value == 1 ? da : db;
    } else {
      o = da == db ? da : Dim();
    }
  }
  return TensorType(a.dtype, std::move(out));
}

std::vector<int64_t> tensor_to_ints(const Tensor& t) {
  std::vector<int64_t> out(static_cast<size_t>(t.numel()));
  visit_dtype(t.dtype(), [&]<class T>() {
    if constexpr (std::is_integral_v<T>) {
      const T* p = t.data<T>();
      for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<int64_t>(p[i]);
    } else if constexpr (!std::is_same_v<T, std::string>) {
      const T* p = t.data<T>();
      for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<int64_t>(static_cast<double>(static_cast<float>(p[i])));
    }
  });
  return out;
}

std::vector<double> tensor_to_doubles(const Tensor& t) {
  std::vector<double> out(static_cast<size_t>(t.numel()));
  visit_dtype(t.dtype(), [&]<class T>() {
    if constexpr (std::is_same_v<T, double>) {
      const T* p = t.data<T>();
      for (size_t i = 0; i < out.size(); ++i) out[i] = p[i];
    } else if constexpr (!std::is_same_v<T, std::string>) {
      const T* p = t.data<T>();
      for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<double>(static_cast<float>(p[i]));
    }
  });
  return out;
}

std::optional<std::vector<int64_t>> known_ints(const InferContext& ctx, int i) {
  const Tensor* t = ctx.input_value(i);
  if (t == nullptr) return std::nullopt;
  return tensor_to_ints(*t);
}

TensorType unknown_dims(DType dtype, int rank) {
  if (rank < 0) return TensorType::unranked(dtype);
  return TensorType(dtype, std::vector<Dim>(static_cast<size_t>(rank)));
}

}  // namespace kiln::compiler
