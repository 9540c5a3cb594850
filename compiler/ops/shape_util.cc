// SPDX-License-Identifier: Apache-2.0
// Attribute and input resolution shared by the shape family's inference and its kernels.
#include "compiler/ops/shape_util.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "compiler/ops/infer_util.h"

namespace kiln::compiler {

Result<std::vector<int64_t>> transpose_perm(const ops::Transpose& op, int rank) {
  std::vector<int64_t> perm(static_cast<size_t>(rank));
  if (!op.perm) {
    for (int i = 0; i < rank; ++i) perm[static_cast<size_t>(i)] = rank - 1 - i;
    return perm;
  }
  if (static_cast<int>(op.perm->size()) != rank) {
    return invalid_argument_error(fmt::format(
        "expected perm of length {} (the input's rank), got [{}]", rank, fmt::join(*op.perm, ",")));
  }
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (size_t i = 0; i < perm.size(); ++i) {
    int64_t p = (*op.perm)[i];
    if (p < 0) p += rank;
    if (p < 0 || p >= rank || seen[static_cast<size_t>(p)]) {
      return invalid_argument_error(
          fmt::format("expected perm to be a permutation of 0..{}, got [{}]", rank - 1,
                      fmt::join(*op.perm, ",")));
    }
    seen[static_cast<size_t>(p)] = true;
    perm[i] = p;
  }
  return perm;
}

Result<std::vector<SliceAxis>> resolve_slice(const std::vector<int64_t>& dims,
                                             const std::vector<int64_t>& starts,
                                             const std::vector<int64_t>& ends,
                                             const std::optional<std::vector<int64_t>>& axes,
                                             const std::optional<std::vector<int64_t>>& steps) {
  const int rank = static_cast<int>(dims.size());
  const size_t n = starts.size();
  if (ends.size() != n || (axes && axes->size() != n) || (steps && steps->size() != n)) {
    return invalid_argument_error(
        fmt::format("expected starts, ends, axes and steps of one length, got {}, {}, {} and {}", n,
                    ends.size(), axes ? axes->size() : n, steps ? steps->size() : n));
  }
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  std::vector<SliceAxis> out;
  for (size_t i = 0; i < n; ++i) {
    int64_t a = axes ? (*axes)[i] : static_cast<int64_t>(i);
    if (a < -rank || a >= rank) {
      return invalid_argument_error(
          fmt::format("expected axes in [{}, {}], got {}", -rank, rank - 1, a));
    }
    if (a < 0) a += rank;
    if (seen[static_cast<size_t>(a)]) {
      return invalid_argument_error(fmt::format("axis {} is repeated in axes", a));
    }
    seen[static_cast<size_t>(a)] = true;
    SliceAxis s;
    s.axis = static_cast<int>(a);
    s.step = steps ? (*steps)[i] : 1;
    if (s.step == 0) return invalid_argument_error("expected nonzero steps");
    const int64_t d = dims[static_cast<size_t>(a)];
    if (d < 0) {
      s.count = -1;
      out.push_back(s);
      continue;
    }
    if (d == 0) {
      s.count = 0;
      out.push_back(s);
      continue;
    }
    int64_t start = starts[i], end = ends[i];
    if (start < 0) start = start < -d ? -1 : start + d;  // keeps start + d from overflowing
    if (end < 0) end = end < -d ? -1 : end + d;
    if (s.step > 0) {
      start = std::clamp<int64_t>(start, 0, d);
      end = std::clamp<int64_t>(end, 0, d);
      s.count = end > start ? 1 + (end - start - 1) / s.step : 0;
    } else {
      start = std::clamp<int64_t>(start, 0, d - 1);
      end = std::clamp<int64_t>(end, -1, d - 1);
      s.count = start > end ? 1 + (end - start + 1) / s.step : 0;
    }
    s.start = start;
    out.push_back(s);
  }
  return out;
}

std::pair<int64_t, int64_t> shape_range(const ops::Shape& op, int rank) {
  auto clamp = [&](int64_t v) {
    if (v < 0) v += rank;
    return std::clamp<int64_t>(v, 0, rank);
  };
  const int64_t start = clamp(op.start);
  const int64_t end = op.end ? clamp(*op.end) : rank;
  return {start, std::max(start, end)};
}

Result<Tensor> constant_tensor(const ops::Constant& op) {
  int set = (op.value.defined() ? 1 : 0) + (op.value_float ? 1 : 0) + (op.value_floats ? 1 : 0) +
            (op.value_int ? 1 : 0) + (op.value_ints ? 1 : 0) + (op.value_string ? 1 : 0) +
            (op.value_strings.empty() ? 0 : 1);
  if (set != 1) {
    return invalid_argument_error(fmt::format("expected exactly one value attribute, got {}", set));
  }
  if (op.value.defined()) return op.value;
  if (op.value_float) return Tensor::scalar(*op.value_float);
  if (op.value_floats) return Tensor::from_vector(*op.value_floats);
  if (op.value_int) return Tensor::scalar(*op.value_int);
  if (op.value_ints) return Tensor::from_vector(*op.value_ints);
  if (op.value_string) return Tensor::scalar(*op.value_string);
  return Tensor::from_vector(op.value_strings);
}

Result<int64_t> range_count(const Tensor& start, const Tensor& limit, const Tensor& delta) {
  if (start.numel() != 1 || limit.numel() != 1 || delta.numel() != 1) {
    return invalid_argument_error("expected one-element start, limit and delta");
  }
  if (dtype_is_integer(start.dtype())) {
    const int64_t s = tensor_to_ints(start)[0], l = tensor_to_ints(limit)[0],
                  d = tensor_to_ints(delta)[0];
    if (d == 0) return invalid_argument_error("expected a nonzero delta");
    int64_t span = 0;
    if (__builtin_sub_overflow(l, s, &span)) {
      return invalid_argument_error(fmt::format("range from {} to {} is too large", s, l));
    }
    int64_t n = span / d + ((span % d != 0 && ((span < 0) == (d < 0))) ? 1 : 0);
    return std::max<int64_t>(n, 0);
  }
  const double s = tensor_to_doubles(start)[0], l = tensor_to_doubles(limit)[0],
               d = tensor_to_doubles(delta)[0];
  if (d == 0) return invalid_argument_error("expected a nonzero delta");
  const double n = std::ceil((l - s) / d);
  if (!(n >= 0)) return 0;
  if (n > 1e15) return invalid_argument_error(fmt::format("range of {} elements is too large", n));
  return static_cast<int64_t>(n);
}

}  // namespace kiln::compiler
