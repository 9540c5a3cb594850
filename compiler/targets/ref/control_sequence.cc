// SPDX-License-Identifier: Apache-2.0
// ref kernels for the control op family's sequence and optional ops.
#include "compiler/ops/control.h"
#include "compiler/ops/infer_util.h"
#include "compiler/targets/ref/control_util.h"
#include "compiler/targets/ref/kernel.h"

namespace kiln::compiler::ref {

namespace {

// A position input (i32 or i64, one element) checked against [-size, size + extra) and made
// non-negative: extra is 0 to address an element, 1 to address an insertion point.
Result<int64_t> read_position(const KernelContext& ctx, int i, size_t size, int64_t extra) {
  const int64_t pos = tensor_to_ints(ctx.input(i))[0];
  const auto n = static_cast<int64_t>(size);
  if (pos < -n || pos >= n + extra) {
    return ctx.errorf("position {} is out of range for a sequence of {} elements", pos, n);
  }
  return pos < 0 ? pos + n : pos;
}

}  // namespace

template <>
Status run_op(const ops::SequenceAt&, KernelContext& ctx) {
  const std::vector<Tensor>& seq = ctx.input_arg(0).sequence();
  KILN_ASSIGN_OR_RETURN(int64_t pos, read_position(ctx, 1, seq.size(), 0));
  ctx.set_output(0, seq[static_cast<size_t>(pos)]);
  return Status();
}

template <>
Status run_op(const ops::SequenceConstruct&, KernelContext& ctx) {
  std::vector<Tensor> seq;
  for (int i = 0; i < ctx.num_inputs(); ++i) seq.push_back(ctx.input(i));
  ctx.set_output(0, Argument::sequence(std::move(seq)));
  return Status();
}

template <>
Status run_op(const ops::SequenceEmpty&, KernelContext& ctx) {
  ctx.set_output(0, Argument::sequence({}));
  return Status();
}

template <>
Status run_op(const ops::SequenceErase&, KernelContext& ctx) {
  std::vector<Tensor> seq = ctx.input_arg(0).sequence();
  int64_t pos = static_cast<int64_t>(seq.size()) - 1;
  if (ctx.has_input(1)) {
    KILN_ASSIGN_OR_RETURN(pos, read_position(ctx, 1, seq.size(), 0));
  } else if (seq.empty()) {
    return ctx.error("cannot erase from an empty sequence");
  }
  seq.erase(seq.begin() + pos);
  ctx.set_output(0, Argument::sequence(std::move(seq)));
  return Status();
}

template <>
Status run_op(const ops::SequenceInsert&, KernelContext& ctx) {
  std::vector<Tensor> seq = ctx.input_arg(0).sequence();
  const Tensor& value = ctx.input(1);
  if (!seq.empty() && seq.front().dtype() != value.dtype()) {
    return ctx.errorf("cannot insert a {} tensor into a sequence of {}", dtype_name(value.dtype()),
                      dtype_name(seq.front().dtype()));
  }
  int64_t pos = static_cast<int64_t>(seq.size());
  if (ctx.has_input(2)) {
    KILN_ASSIGN_OR_RETURN(pos, read_position(ctx, 2, seq.size(), 1));
  }
  seq.insert(seq.begin() + pos, value);
  ctx.set_output(0, Argument::sequence(std::move(seq)));
  return Status();
}

template <>
Status run_op(const ops::SequenceLength&, KernelContext& ctx) {
  const auto n = static_cast<int64_t>(ctx.input_arg(0).sequence().size());
  ctx.set_output(0, Tensor::scalar<int64_t>(n));
  return Status();
}

template <>
Status run_op(const ops::SplitToSequence& op, KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  KILN_ASSIGN_OR_RETURN(int axis, normalize_axis(op.axis, x.rank()));
  const int64_t dim = x.shape()[axis];
  std::vector<Tensor> seq;
  if (!ctx.has_input(1)) {
    for (int64_t i = 0; i < dim; ++i) {
      KILN_ASSIGN_OR_RETURN(
          Tensor part, op.keepdims != 0 ? slice_axis(x, axis, i, i + 1) : take_axis(x, axis, i));
      seq.push_back(std::move(part));
    }
    ctx.set_output(0, Argument::sequence(std::move(seq)));
    return Status();
  }
  const std::vector<int64_t> split = tensor_to_ints(ctx.input(1));
  std::vector<int64_t> sizes;
  if (ctx.input(1).rank() == 0) {
    if (split[0] <= 0) return ctx.errorf("a scalar split must be positive, got {}", split[0]);
    for (int64_t begin = 0; begin < dim; begin += split[0]) {
      sizes.push_back(std::min(split[0], dim - begin));
    }
  } else {
    int64_t sum = 0;
    for (int64_t s : split) {
      if (s < 0) return ctx.errorf("split sizes must be non-negative, got {}", s);
      sum += s;
    }
    if (sum != dim) {
      return ctx.errorf("split sizes must sum to the axis length {}, got {}", dim, sum);
    }
    sizes = split;
  }
  int64_t begin = 0;
  for (int64_t s : sizes) {
    KILN_ASSIGN_OR_RETURN(Tensor part, slice_axis(x, axis, begin, begin + s));
    seq.push_back(std::move(part));
    begin += s;
  }
  ctx.set_output(0, Argument::sequence(std::move(seq)));
  return Status();
}

template <>
Status run_op(const ops::ConcatFromSequence& op, KernelContext& ctx) {
  const std::vector<Tensor>& seq = ctx.input_arg(0).sequence();
  if (seq.empty()) return ctx.error("cannot concatenate an empty sequence");
  const int rank = seq.front().rank() + (op.new_axis != 0 ? 1 : 0);
  KILN_ASSIGN_OR_RETURN(int axis, normalize_axis(*op.axis, rank));
  Result<Tensor> out = op.new_axis != 0 ? stack_axis(seq, axis) : concat_axis(seq, axis);
  if (!out.ok()) return ctx.error(out.status().message());
  ctx.set_output(0, std::move(out).value());
  return Status();
}

template <>
Status run_op(const ops::Optional&, KernelContext& ctx) {
  ctx.set_output(0, ctx.has_input(0) ? ctx.input_arg(0) : Argument());
  return Status();
}

template <>
Status run_op(const ops::OptionalGetElement&, KernelContext& ctx) {
  if (!ctx.has_input(0)) return ctx.error("the optional input is empty");
  ctx.set_output(0, ctx.input_arg(0));
  return Status();
}

template <>
Status run_op(const ops::OptionalHasElement&, KernelContext& ctx) {
  ctx.set_output(0, Tensor::scalar<bool>(ctx.has_input(0)));
  return Status();
}

}  // namespace kiln::compiler::ref
