// SPDX-License-Identifier: Apache-2.0
// Declarations of every operator's schema and factory, generated from operator_list.inc.
#pragma once

#include "pipeline/operators/operator.h"

namespace kiln::pipeline::detail {

#define KILN_PIPELINE_OPERATOR(id)     \
  const OperatorSchema& id##_schema(); \
  Result<std::unique_ptr<Operator>> make_##id(OpArgs args);
#include "pipeline/operators/operator_list.inc"
#undef KILN_PIPELINE_OPERATOR

// Ok when `image` is a non-empty [H, W, C] tensor (uint8 when `u8_only`); else an error naming
// `op`.
Status check_image(std::string_view op, const Tensor& image, bool u8_only);

}  // namespace kiln::pipeline::detail
