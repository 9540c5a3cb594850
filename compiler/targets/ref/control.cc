// SPDX-License-Identifier: Apache-2.0
// ref kernels for the control op family: plain loops, the executable specification.
#include "compiler/ops/control.h"

#include "compiler/targets/ref/kernel.h"

namespace kiln::compiler::ref {

template <>
Status run_op(const ops::If&, KernelContext& ctx) {
  return ctx.error("the ref target has no kernel for this op yet");
}

template <>
Status run_op(const ops::Loop&, KernelContext& ctx) {
  return ctx.error("the ref target has no kernel for this op yet");
}

template <>
Status run_op(const ops::Scan&, KernelContext& ctx) {
  return ctx.error("the ref target has no kernel for this op yet");
}

template <>
Status run_op(const ops::SequenceAt&, KernelContext& ctx) {
  return ctx.error("the ref target has no kernel for this op yet");
}

template <>
Status run_op(const ops::SequenceConstruct&, KernelContext& ctx) {
  return ctx.error("the ref target has no kernel for this op yet");
}

template <>
Status run_op(const ops::SequenceEmpty&, KernelContext& ctx) {
  return ctx.error("the ref target has no kernel for this op yet");
}

template <>
Status run_op(const ops::SequenceErase&, KernelContext& ctx) {
  return ctx.error("the ref target has no kernel for this op yet");
}

template <>
Status run_op(const ops::SequenceInsert&, KernelContext& ctx) {
  return ctx.error("the ref target has no kernel for this op yet");
}

template <>
Status run_op(const ops::SequenceLength&, KernelContext& ctx) {
  return ctx.error("the ref target has no kernel for this op yet");
}

template <>
Status run_op(const ops::SequenceMap&, KernelContext& ctx) {
  return ctx.error("the ref target has no kernel for this op yet");
}

template <>
Status run_op(const ops::SplitToSequence&, KernelContext& ctx) {
  return ctx.error("the ref target has no kernel for this op yet");
}

template <>
Status run_op(const ops::ConcatFromSequence&, KernelContext& ctx) {
  return ctx.error("the ref target has no kernel for this op yet");
}

template <>
Status run_op(const ops::Optional&, KernelContext& ctx) {
  return ctx.error("the ref target has no kernel for this op yet");
}

template <>
Status run_op(const ops::OptionalGetElement&, KernelContext& ctx) {
  return ctx.error("the ref target has no kernel for this op yet");
}

template <>
Status run_op(const ops::OptionalHasElement&, KernelContext& ctx) {
  return ctx.error("the ref target has no kernel for this op yet");
}

}  // namespace kiln::compiler::ref
