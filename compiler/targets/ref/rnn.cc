// SPDX-License-Identifier: Apache-2.0
// ref kernels for the rnn op family: plain loops, the executable specification.
#include "compiler/ops/rnn.h"

#include "compiler/targets/ref/kernel.h"

namespace kiln::compiler::ref {

template <>
Status run_op(const ops::RNN&, KernelContext& ctx) {
  return ctx.error("the ref target has no kernel for this op yet");
}

template <>
Status run_op(const ops::GRU&, KernelContext& ctx) {
  return ctx.error("the ref target has no kernel for this op yet");
}

template <>
Status run_op(const ops::LSTM&, KernelContext& ctx) {
  return ctx.error("the ref target has no kernel for this op yet");
}

}  // namespace kiln::compiler::ref
