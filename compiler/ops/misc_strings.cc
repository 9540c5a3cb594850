// SPDX-License-Identifier: Apache-2.0
// Type and shape inference for the string ops of the misc family (opset 20).
#include <re2/re2.h>

#include "compiler/ops/infer.h"
#include "compiler/ops/infer_util.h"
#include "compiler/ops/misc.h"

namespace kiln::compiler {

namespace {

Status require_strings(const InferContext& ctx, int i) {
  KILN_RETURN_IF_ERROR(ctx.require_input(i));
  if (ctx.input(i).dtype != DType::kString) {
    return ctx.errorf("expected a string input {}, got {}", i, ctx.input(i).to_string());
  }
  return Status();
}

}  // namespace

template <>
InferResult infer_op(const ops::StringConcat&, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(require_strings(ctx, 0));
  KILN_RETURN_IF_ERROR(require_strings(ctx, 1));
  KILN_ASSIGN_OR_RETURN(TensorType out, broadcast_types(ctx, ctx.input(0), ctx.input(1)));
  return std::vector<ValueType>{std::move(out)};
}

template <>
InferResult infer_op(const ops::StringSplit& op, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(require_strings(ctx, 0));
  if (op.maxsplit && *op.maxsplit < 0)
    return ctx.errorf("expected maxsplit >= 0, got {}", *op.maxsplit);
  const TensorType& x = ctx.input(0);
  if (!x.has_rank()) {
    return std::vector<ValueType>{TensorType::unranked(DType::kString),
                                  TensorType::unranked(DType::kI64)};
  }
  std::vector<Dim> dims = *x.dims;
  dims.emplace_back();  // the most substrings, known when it runs
  return std::vector<ValueType>{TensorType(DType::kString, std::move(dims)),
                                TensorType(DType::kI64, *x.dims)};
}

template <>
InferResult infer_op(const ops::RegexFullMatch& op, const InferContext& ctx) {
  if (!op.pattern) return ctx.error("expected the pattern attribute");
  RE2 re(*op.pattern, RE2::Quiet);
  if (!re.ok())
    return ctx.errorf("pattern \"{}\" is not a valid RE2 regex: {}", *op.pattern, re.error());
  KILN_RETURN_IF_ERROR(require_strings(ctx, 0));
  TensorType out = ctx.input(0);
  out.dtype = DType::kBool;
  return std::vector<ValueType>{std::move(out)};
}

}  // namespace kiln::compiler
