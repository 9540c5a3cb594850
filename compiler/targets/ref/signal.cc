// SPDX-License-Identifier: Apache-2.0
// ref kernels for the signal op family: plain loops, the executable specification.
#include "compiler/ops/signal.h"

#include "compiler/targets/ref/kernel.h"

namespace kiln::compiler::ref {

template <>
Status run_op(const ops::DFT&, KernelContext& ctx) {
  return ctx.error("the ref target has no kernel for this op yet");
}

template <>
Status run_op(const ops::STFT&, KernelContext& ctx) {
  return ctx.error("the ref target has no kernel for this op yet");
}

template <>
Status run_op(const ops::BlackmanWindow&, KernelContext& ctx) {
  return ctx.error("the ref target has no kernel for this op yet");
}

template <>
Status run_op(const ops::HammingWindow&, KernelContext& ctx) {
  return ctx.error("the ref target has no kernel for this op yet");
}

template <>
Status run_op(const ops::HannWindow&, KernelContext& ctx) {
  return ctx.error("the ref target has no kernel for this op yet");
}

template <>
Status run_op(const ops::MelWeightMatrix&, KernelContext& ctx) {
  return ctx.error("the ref target has no kernel for this op yet");
}

}  // namespace kiln::compiler::ref
