// SPDX-License-Identifier: Apache-2.0
// Type and shape inference for the control op family.
#include "compiler/ops/control.h"

#include "compiler/ops/infer.h"

namespace kiln::compiler {

template <>
InferResult infer_op(const ops::If&, const InferContext& ctx) {
  return unimplemented_error(fmt::format("{}: kiln does not support this op yet", ctx.node().describe()));
}

template <>
InferResult infer_op(const ops::Loop&, const InferContext& ctx) {
  return unimplemented_error(fmt::format("{}: kiln does not support this op yet", ctx.node().describe()));
}

template <>
InferResult infer_op(const ops::Scan&, const InferContext& ctx) {
  return unimplemented_error(fmt::format("{}: kiln does not support this op yet", ctx.node().describe()));
}

template <>
InferResult infer_op(const ops::SequenceAt&, const InferContext& ctx) {
  return unimplemented_error(fmt::format("{}: kiln does not support this op yet", ctx.node().describe()));
}

template <>
InferResult infer_op(const ops::SequenceConstruct&, const InferContext& ctx) {
  return unimplemented_error(fmt::format("{}: kiln does not support this op yet", ctx.node().describe()));
}

template <>
InferResult infer_op(const ops::SequenceEmpty&, const InferContext& ctx) {
  return unimplemented_error(fmt::format("{}: kiln does not support this op yet", ctx.node().describe()));
}

template <>
InferResult infer_op(const ops::SequenceErase&, const InferContext& ctx) {
  return unimplemented_error(fmt::format("{}: kiln does not support this op yet", ctx.node().describe()));
}

template <>
InferResult infer_op(const ops::SequenceInsert&, const InferContext& ctx) {
  return unimplemented_error(fmt::format("{}: kiln does not support this op yet", ctx.node().describe()));
}

template <>
InferResult infer_op(const ops::SequenceLength&, const InferContext& ctx) {
  return unimplemented_error(fmt::format("{}: kiln does not support this op yet", ctx.node().describe()));
}

template <>
InferResult infer_op(const ops::SequenceMap&, const InferContext& ctx) {
  return unimplemented_error(fmt::format("{}: kiln does not support this op yet", ctx.node().describe()));
}

template <>
InferResult infer_op(const ops::SplitToSequence&, const InferContext& ctx) {
  return unimplemented_error(fmt::format("{}: kiln does not support this op yet", ctx.node().describe()));
}

template <>
InferResult infer_op(const ops::ConcatFromSequence&, const InferContext& ctx) {
  return unimplemented_error(fmt::format("{}: kiln does not support this op yet", ctx.node().describe()));
}

template <>
InferResult infer_op(const ops::Optional&, const InferContext& ctx) {
  return unimplemented_error(fmt::format("{}: kiln does not support this op yet", ctx.node().describe()));
}

template <>
InferResult infer_op(const ops::OptionalGetElement&, const InferContext& ctx) {
  return unimplemented_error(fmt::format("{}: kiln does not support this op yet", ctx.node().describe()));
}

template <>
InferResult infer_op(const ops::OptionalHasElement&, const InferContext& ctx) {
  return unimplemented_error(fmt::format("{}: kiln does not support this op yet", ctx.node().describe()));
}

}  // namespace kiln::compiler
