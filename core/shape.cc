// SPDX-License-Identifier: Apache-2.0
// Shape arithmetic.
#include "core/shape.h"

#include <fmt/format.h>

#include <algorithm>

namespace kiln {

int64_t Shape::numel() const { return numel(0, rank()); }

int64_t Shape::numel(int begin, int end) const {
  int64_t n = 1;
  for (int i = begin; i < end; ++i) n *= dims_[static_cast<size_t>(i)];
  return n;
}

std::vector<int64_t> Shape::strides() const {
  std::vector<int64_t> s(dims_.size());
  int64_t stride = 1;
  for (size_t i = dims_.size(); i-- > 0;) {
    s[i] = stride;
    stride *= std::max<int64_t>(dims_[i], 1);
  }
  return s;
}

Result<int64_t> Shape::checked_numel(int64_t max_elements) const {
  int64_t n = 1;
  for (int64_t d : dims_) {
    if (d < 0) return invalid_argument_error(fmt::format("shape {} has a negative dim", to_string()));
    if (d != 0 && n > max_elements / d) {
      return out_of_range_error(
          fmt::format("shape {} has more than {} elements", to_string(), max_elements));
    }
    n *= d;
  }
  return n;
}

std::string Shape::to_string() const { return fmt::format("[{}]", fmt::join(dims_, ",")); }

Result<int> normalize_axis(int64_t axis, int rank) {
  if (axis < -rank || axis >= rank) {
    return out_of_range_error(fmt::format("axis {} is out of range for rank {}", axis, rank));
  }
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

Result<Shape> broadcast_shapes(const Shape& a, const Shape& b) {
  int rank = std::max(a.rank(), b.rank());
  std::vector<int64_t> out(static_cast<size_t>(rank));
  for (int i = 0; i < rank; ++i) {
    int ia = i - (rank - a.rank());
    int ib = i - (rank - b.rank());
    int64_t da = ia >= 0 ? a[ia] : 1;
    int64_t db = ib >= 0 ? b[ib] : 1;
    if (da != db && da != 1 && db != 1) {
      return invalid_argument_error(fmt::format("shapes {} and {} do not broadcast (dim {}: {} vs {})",
                                                a.to_string(), b.to_string(), i, da, db));
    }
    out[static_cast<size_t>(i)] = da == 1 ? db : da;
  }
  return Shape(std::move(out));
}

}  // namespace kiln
