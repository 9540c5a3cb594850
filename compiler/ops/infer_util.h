// SPDX-License-Identifier: Apache-2.0
// Helpers shared by the ops' inference functions: broadcasting, constant inputs, common shapes.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "compiler/ops/infer.h"

namespace kiln::compiler {

// The output is input `i`'s type (elementwise unary ops).
InferResult same_as_input(const InferContext& ctx, int i = 0);

// The numpy broadcast of two tensor types; unknown dims stay unknown unless the other is > 1.
Result<TensorType> broadcast_types(const InferContext& ctx, const TensorType& a, const TensorType& b);

// The values of a known integer input (i32 or i64, any rank) as int64; nullopt when the value is
// not known (e.g. at compile time for a computed input).
std::optional<std::vector<int64_t>> known_ints(const InferContext& ctx, int i);

// Reads an integer tensor (i32 or i64, any rank) as int64 values.
std::vector<int64_t> tensor_to_ints(const Tensor& t);
// Reads any numeric tensor as doubles.
std::vector<double> tensor_to_doubles(const Tensor& t);

// A tensor type of `rank` unknown dims (rank < 0: unranked).
TensorType unknown_dims(DType dtype, int rank);

}  // namespace kiln::compiler
