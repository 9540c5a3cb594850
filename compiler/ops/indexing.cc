// SPDX-License-Identifier: Apache-2.0
// Type and shape inference for the indexing op family.
#include "compiler/ops/indexing.h"

#include "compiler/ops/infer.h"

namespace kiln::compiler {

template <>
InferResult infer_op(const ops::Gather&, const InferContext& ctx) {
  return unimplemented_error(fmt::format("{}: kiln does not support this op yet", ctx.node().describe()));
}

template <>
InferResult infer_op(const ops::GatherElements&, const InferContext& ctx) {
  return unimplemented_error(fmt::format("{}: kiln does not support this op yet", ctx.node().describe()));
}

template <>
InferResult infer_op(const ops::GatherND&, const InferContext& ctx) {
  return unimplemented_error(fmt::format("{}: kiln does not support this op yet", ctx.node().describe()));
}

template <>
InferResult infer_op(const ops::Scatter&, const InferContext& ctx) {
  return unimplemented_error(fmt::format("{}: kiln does not support this op yet", ctx.node().describe()));
}

template <>
InferResult infer_op(const ops::ScatterElements&, const InferContext& ctx) {
  return unimplemented_error(fmt::format("{}: kiln does not support this op yet", ctx.node().describe()));
}

template <>
InferResult infer_op(const ops::ScatterND&, const InferContext& ctx) {
  return unimplemented_error(fmt::format("{}: kiln does not support this op yet", ctx.node().describe()));
}

template <>
InferResult infer_op(const ops::OneHot&, const InferContext& ctx) {
  return unimplemented_error(fmt::format("{}: kiln does not support this op yet", ctx.node().describe()));
}

template <>
InferResult infer_op(const ops::Compress&, const InferContext& ctx) {
  return unimplemented_error(fmt::format("{}: kiln does not support this op yet", ctx.node().describe()));
}

template <>
InferResult infer_op(const ops::NonZero&, const InferContext& ctx) {
  return unimplemented_error(fmt::format("{}: kiln does not support this op yet", ctx.node().describe()));
}

template <>
InferResult infer_op(const ops::Unique&, const InferContext& ctx) {
  return unimplemented_error(fmt::format("{}: kiln does not support this op yet", ctx.node().describe()));
}

template <>
InferResult infer_op(const ops::ReverseSequence&, const InferContext& ctx) {
  return unimplemented_error(fmt::format("{}: kiln does not support this op yet", ctx.node().describe()));
}

}  // namespace kiln::compiler
