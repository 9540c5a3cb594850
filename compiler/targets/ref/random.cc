// SPDX-License-Identifier: Apache-2.0
// ref kernels for the random op family: plain loops, the executable specification.
#include "compiler/ops/random.h"

#include "compiler/targets/ref/kernel.h"

namespace kiln::compiler::ref {

template <>
Status run_op(const ops::Bernoulli&, KernelContext& ctx) {
  return ctx.error("the ref target has no kernel for this op yet");
}

template <>
Status run_op(const ops::RandomUniform&, KernelContext& ctx) {
  return ctx.error("the ref target has no kernel for this op yet");
}

template <>
Status run_op(const ops::RandomUniformLike&, KernelContext& ctx) {
  return ctx.error("the ref target has no kernel for this op yet");
}

template <>
Status run_op(const ops::RandomNormal&, KernelContext& ctx) {
  return ctx.error("the ref target has no kernel for this op yet");
}

template <>
Status run_op(const ops::RandomNormalLike&, KernelContext& ctx) {
  return ctx.error("the ref target has no kernel for this op yet");
}

template <>
Status run_op(const ops::Multinomial&, KernelContext& ctx) {
  return ctx.error("the ref target has no kernel for this op yet");
}

}  // namespace kiln::compiler::ref
