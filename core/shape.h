// SPDX-License-Identifier: Apache-2.0
// Shape: the dimensions of a dense row-major tensor, with the arithmetic kernels and passes need.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"

namespace kiln {

class Shape {
 public:
  Shape() = default;  // rank 0: a scalar with one element
  Shape(std::initializer_list<int64_t> dims) : dims_(dims) {}
  explicit Shape(std::vector<int64_t> dims) : dims_(std::move(dims)) {}
  explicit Shape(std::span<const int64_t> dims) : dims_(dims.begin(), dims.end()) {}

  int rank() const { return static_cast<int>(dims_.size()); }
  int64_t operator[](int axis) const { return dims_[static_cast<size_t>(axis)]; }
  int64_t& operator[](int axis) { return dims_[static_cast<size_t>(axis)]; }
  const std::vector<int64_t>& dims() const { return dims_; }
  std::vector<int64_t>& dims() { return dims_; }
  auto begin() const { return dims_.begin(); }
  auto end() const { return dims_.end(); }

  // Product of the dims (1 for a scalar). Dims must be non-negative.
  int64_t numel() const;
  // Product of dims [begin, end).
  int64_t numel(int begin, int end) const;
  // Row-major element strides: the last is 1.
  std::vector<int64_t> strides() const;
  // The element count, or an error naming the shape if a dim is negative or the count overflows
  // `max_elements`.
  Result<int64_t> checked_numel(int64_t max_elements = INT64_MAX) const;

  // "[2,3,224,224]"; "[]" for a scalar.
  std::string to_string() const;

  friend bool operator==(const Shape& a, const Shape& b) { return a.dims_ == b.dims_; }

 private:
  std::vector<int64_t> dims_;
};

// Maps a possibly negative axis into [0, rank), or an out-of-range error.
Result<int> normalize_axis(int64_t axis, int rank);

// The numpy-style broadcast of two shapes, or an invalid-argument error naming both.
Result<Shape> broadcast_shapes(const Shape& a, const Shape& b);

}  // namespace kiln
