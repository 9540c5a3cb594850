// SPDX-License-Identifier: Apache-2.0
// ref kernels for the nn op family: plain loops, the executable specification.
#include "compiler/ops/nn.h"

#include "compiler/targets/ref/kernel.h"

namespace kiln::compiler::ref {

template <>
Status run_op(const ops::Conv&, KernelContext& ctx) {
  return ctx.error("the ref target has no kernel for this op yet");
}

template <>
Status run_op(const ops::ConvTranspose&, KernelContext& ctx) {
  return ctx.error("the ref target has no kernel for this op yet");
}

template <>
Status run_op(const ops::AveragePool&, KernelContext& ctx) {
  return ctx.error("the ref target has no kernel for this op yet");
}

template <>
Status run_op(const ops::MaxPool&, KernelContext& ctx) {
  return ctx.error("the ref target has no kernel for this op yet");
}

template <>
Status run_op(const ops::LpPool&, KernelContext& ctx) {
  return ctx.error("the ref target has no kernel for this op yet");
}

template <>
Status run_op(const ops::GlobalAveragePool&, KernelContext& ctx) {
  return ctx.error("the ref target has no kernel for this op yet");
}

template <>
Status run_op(const ops::GlobalMaxPool&, KernelContext& ctx) {
  return ctx.error("the ref target has no kernel for this op yet");
}

template <>
Status run_op(const ops::GlobalLpPool&, KernelContext& ctx) {
  return ctx.error("the ref target has no kernel for this op yet");
}

template <>
Status run_op(const ops::MaxUnpool&, KernelContext& ctx) {
  return ctx.error("the ref target has no kernel for this op yet");
}

template <>
Status run_op(const ops::BatchNormalization&, KernelContext& ctx) {
  return ctx.error("the ref target has no kernel for this op yet");
}

template <>
Status run_op(const ops::InstanceNormalization&, KernelContext& ctx) {
  return ctx.error("the ref target has no kernel for this op yet");
}

template <>
Status run_op(const ops::LayerNormalization&, KernelContext& ctx) {
  return ctx.error("the ref target has no kernel for this op yet");
}

template <>
Status run_op(const ops::LRN&, KernelContext& ctx) {
  return ctx.error("the ref target has no kernel for this op yet");
}

template <>
Status run_op(const ops::MeanVarianceNormalization&, KernelContext& ctx) {
  return ctx.error("the ref target has no kernel for this op yet");
}

template <>
Status run_op(const ops::LpNormalization&, KernelContext& ctx) {
  return ctx.error("the ref target has no kernel for this op yet");
}

template <>
Status run_op(const ops::Dropout&, KernelContext& ctx) {
  return ctx.error("the ref target has no kernel for this op yet");
}

template <>
Status run_op(const ops::Softmax&, KernelContext& ctx) {
  return ctx.error("the ref target has no kernel for this op yet");
}

template <>
Status run_op(const ops::LogSoftmax&, KernelContext& ctx) {
  return ctx.error("the ref target has no kernel for this op yet");
}

template <>
Status run_op(const ops::Hardmax&, KernelContext& ctx) {
  return ctx.error("the ref target has no kernel for this op yet");
}

}  // namespace kiln::compiler::ref
