// SPDX-License-Identifier: Apache-2.0
// Helpers shared by the attention family's inference: dims that may be unknown, head counts.
#pragma once

#include <cstdint>
#include <string_view>

#include "compiler/ops/infer.h"

namespace kiln::compiler::attention {

Status check_arity(const InferContext& ctx, int min, int max);
// Input i is a present tensor of a float type.
Status check_float(const InferContext& ctx, int i);
// Both head counts are positive and q_heads is a multiple of kv_heads.
Status check_heads(const InferContext& ctx, int64_t q_heads, int64_t kv_heads);

// Dim `i` of `t`, unknown when the rank is unknown.
Dim dim_at(const TensorType& t, int i);
// a * b, unknown unless both are known.
Dim mul_dim(const Dim& a, const Dim& b);
// d / parts, which must divide it where d is known; `what` names the input in the error.
Result<Dim> div_dim(const InferContext& ctx, const Dim& d, int64_t parts, std::string_view what);
// The dim a and b both are (the known one where only one is); an error naming `what` where they
// differ.
Result<Dim> match_dim(const InferContext& ctx, const Dim& a, const Dim& b, std::string_view what);

}  // namespace kiln::compiler::attention
