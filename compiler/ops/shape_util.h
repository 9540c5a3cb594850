// SPDX-License-Identifier: Apache-2.0
// Attribute and input resolution shared by the shape family's inference and its kernels.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "compiler/ops/shape.h"
#include "core/status.h"
#include "core/tensor.h"

namespace kiln::compiler {

// The permutation a Transpose applies to a rank-`rank` input: `perm`, or the dims reversed.
// Fails unless perm is a permutation of [0, rank).
Result<std::vector<int64_t>> transpose_perm(const ops::Transpose& op, int rank);

// One sliced axis: elements start, start+step, ... (count of them; -1 when the dim is unknown).
struct SliceAxis {
  int axis = 0;
  int64_t start = 0;
  int64_t step = 1;
  int64_t count = 0;
};

// Resolves Slice's starts/ends/axes/steps (ONNX opset 13 clamping) against `dims` (-1: unknown).
// Fails on mismatched lengths, out-of-range or repeated axes, and zero steps.
Result<std::vector<SliceAxis>> resolve_slice(const std::vector<int64_t>& dims,
                                             const std::vector<int64_t>& starts,
                                             const std::vector<int64_t>& ends,
                                             const std::optional<std::vector<int64_t>>& axes,
                                             const std::optional<std::vector<int64_t>>& steps);

// The [start, end) range of dims that Shape reports for a rank-`rank` input, clamped.
std::pair<int64_t, int64_t> shape_range(const ops::Shape& op, int rank);

// The tensor a Constant produces, from whichever value attribute is set (exactly one must be).
Result<Tensor> constant_tensor(const ops::Constant& op);

// The element count of Range(start, limit, delta): max(ceil((limit - start) / delta), 0).
// Fails when delta is zero.
Result<int64_t> range_count(const Tensor& start, const Tensor& limit, const Tensor& delta);

}  // namespace kiln::compiler
