// SPDX-License-Identifier: Apache-2.0
// Type and shape inference for the rnn op family.
#include "compiler/ops/rnn.h"

#include "compiler/ops/infer.h"

namespace kiln::compiler {

template <>
InferResult infer_op(const ops::RNN&, const InferContext& ctx) {
  return unimplemented_error(fmt::format("{}: kiln does not support this op yet", ctx.node().describe()));
}

template <>
InferResult infer_op(const ops::GRU&, const InferContext& ctx) {
  return unimplemented_error(fmt::format("{}: kiln does not support this op yet", ctx.node().describe()));
}

template <>
InferResult infer_op(const ops::LSTM&, const InferContext& ctx) {
  return unimplemented_error(fmt::format("{}: kiln does not support this op yet", ctx.node().describe()));
}

}  // namespace kiln::compiler
