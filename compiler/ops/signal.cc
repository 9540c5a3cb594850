// SPDX-License-Identifier: Apache-2.0
// Type and shape inference for the signal op family.
#include "compiler/ops/signal.h"

#include "compiler/ops/infer.h"

namespace kiln::compiler {

template <>
InferResult infer_op(const ops::DFT&, const InferContext& ctx) {
  return unimplemented_error(fmt::format("{}: kiln does not support this op yet", ctx.node().describe()));
}

template <>
InferResult infer_op(const ops::STFT&, const InferContext& ctx) {
  return unimplemented_error(fmt::format("{}: kiln does not support this op yet", ctx.node().describe()));
}

template <>
InferResult infer_op(const ops::BlackmanWindow&, const InferContext& ctx) {
  return unimplemented_error(fmt::format("{}: kiln does not support this op yet", ctx.node().describe()));
}

template <>
InferResult infer_op(const ops::HammingWindow&, const InferContext& ctx) {
  return unimplemented_error(fmt::format("{}: kiln does not support this op yet", ctx.node().describe()));
}

template <>
InferResult infer_op(const ops::HannWindow&, const InferContext& ctx) {
  return unimplemented_error(fmt::format("{}: kiln does not support this op yet", ctx.node().describe()));
}

template <>
InferResult infer_op(const ops::MelWeightMatrix&, const InferContext& ctx) {
  return unimplemented_error(fmt::format("{}: kiln does not support this op yet", ctx.node().describe()));
}

}  // namespace kiln::compiler
