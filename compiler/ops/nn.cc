// SPDX-License-Identifier: Apache-2.0
// Type and shape inference for the nn op family.
#include "compiler/ops/nn.h"

#include "compiler/ops/infer.h"

namespace kiln::compiler {

template <>
InferResult infer_op(const ops::Conv&, const InferContext& ctx) {
  return unimplemented_error(fmt::format("{}: kiln does not support this op yet", ctx.node().describe()));
}

template <>
InferResult infer_op(const ops::ConvTranspose&, const InferContext& ctx) {
  return unimplemented_error(fmt::format("{}: kiln does not support this op yet", ctx.node().describe()));
}

template <>
InferResult infer_op(const ops::AveragePool&, const InferContext& ctx) {
  return unimplemented_error(fmt::format("{}: kiln does not support this op yet", ctx.node().describe()));
}

template <>
InferResult infer_op(const ops::MaxPool&, const InferContext& ctx) {
  return unimplemented_error(fmt::format("{}: kiln does not support this op yet", ctx.node().describe()));
}

template <>
InferResult infer_op(const ops::LpPool&, const InferContext& ctx) {
  return unimplemented_error(fmt::format("{}: kiln does not support this op yet", ctx.node().describe()));
}

template <>
InferResult infer_op(const ops::GlobalAveragePool&, const InferContext& ctx) {
  return unimplemented_error(fmt::format("{}: kiln does not support this op yet", ctx.node().describe()));
}

template <>
InferResult infer_op(const ops::GlobalMaxPool&, const InferContext& ctx) {
  return unimplemented_error(fmt::format("{}: kiln does not support this op yet", ctx.node().describe()));
}

template <>
InferResult infer_op(const ops::GlobalLpPool&, const InferContext& ctx) {
  return unimplemented_error(fmt::format("{}: kiln does not support this op yet", ctx.node().describe()));
}

template <>
InferResult infer_op(const ops::MaxUnpool&, const InferContext& ctx) {
  return unimplemented_error(fmt::format("{}: kiln does not support this op yet", ctx.node().describe()));
}

template <>
InferResult infer_op(const ops::BatchNormalization&, const InferContext& ctx) {
  return unimplemented_error(fmt::format("{}: kiln does not support this op yet", ctx.node().describe()));
}

template <>
InferResult infer_op(const ops::InstanceNormalization&, const InferContext& ctx) {
  return unimplemented_error(fmt::format("{}: kiln does not support this op yet", ctx.node().describe()));
}

template <>
InferResult infer_op(const ops::LayerNormalization&, const InferContext& ctx) {
  return unimplemented_error(fmt::format("{}: kiln does not support this op yet", ctx.node().describe()));
}

template <>
InferResult infer_op(const ops::LRN&, const InferContext& ctx) {
  return unimplemented_error(fmt::format("{}: kiln does not support this op yet", ctx.node().describe()));
}

template <>
InferResult infer_op(const ops::MeanVarianceNormalization&, const InferContext& ctx) {
  return unimplemented_error(fmt::format("{}: kiln does not support this op yet", ctx.node().describe()));
}

template <>
InferResult infer_op(const ops::LpNormalization&, const InferContext& ctx) {
  return unimplemented_error(fmt::format("{}: kiln does not support this op yet", ctx.node().describe()));
}

template <>
InferResult infer_op(const ops::Dropout&, const InferContext& ctx) {
  return unimplemented_error(fmt::format("{}: kiln does not support this op yet", ctx.node().describe()));
}

template <>
InferResult infer_op(const ops::Softmax&, const InferContext& ctx) {
  return unimplemented_error(fmt::format("{}: kiln does not support this op yet", ctx.node().describe()));
}

template <>
InferResult infer_op(const ops::LogSoftmax&, const InferContext& ctx) {
  return unimplemented_error(fmt::format("{}: kiln does not support this op yet", ctx.node().describe()));
}

template <>
InferResult infer_op(const ops::Hardmax&, const InferContext& ctx) {
  return unimplemented_error(fmt::format("{}: kiln does not support this op yet", ctx.node().describe()));
}

}  // namespace kiln::compiler
