// SPDX-License-Identifier: Apache-2.0
// ref kernels for the control op family's subgraph ops: If, Loop, Scan and SequenceMap.
#include "compiler/ops/control.h"

#include <algorithm>
#include <limits>

#include "compiler/ops/infer_util.h"
#include "compiler/targets/ref/control_util.h"
#include "compiler/targets/ref/kernel.h"

namespace kiln::compiler::ref {

namespace {

Argument input_or_none(const KernelContext& ctx, int i) {
  return ctx.has_input(i) ? ctx.input_arg(i) : Argument();
}

Result<bool> read_bool(const KernelContext& ctx, const Argument& arg, std::string_view what) {
  if (!arg.is_tensor() || arg.tensor().dtype() != DType::kBool || arg.tensor().numel() != 1) {
    return ctx.errorf("{} must be a bool tensor of one element, got {}", what, arg.to_string());
  }
  return arg.tensor().data<bool>()[0];
}

Result<std::vector<Argument>> run_body(KernelContext& ctx, const Graph& body,
                                       std::vector<Argument> inputs) {
  Result<std::vector<Argument>> outs = ctx.run_subgraph(body, std::move(inputs));
  if (!outs.ok()) return outs.status().with_context(ctx.node().describe());
  return outs;
}

// A scan output of zero iterations: the body output's static dims with `length` 0 inserted at
// `axis`.
Result<Tensor> empty_scan_output(const KernelContext& ctx, const Value& body_out, int axis) {
  const ValueType& t = body_out.type();
  if (!t.is_tensor() || !t.tensor().is_static()) {
    return ctx.errorf(
        "no iterations ran and the body output \"{}\" has no static shape ({}) to "
        "build an empty scan output from",
        body_out.name(), t.to_string());
  }
  std::vector<int64_t> dims = t.tensor().shape().dims();
  if (axis < 0 || axis > static_cast<int>(dims.size())) {
    return ctx.errorf("scan output axis {} is out of range for {}", axis, t.to_string());
  }
  dims.insert(dims.begin() + axis, 0);
  return Tensor::allocate(t.tensor().dtype, Shape(std::move(dims)));
}

// The final states and, per scan output, the element of each iteration in iteration order.
struct ScanSteps {
  std::vector<Argument> states;
  std::vector<std::vector<Tensor>> elements;
};

// Runs `length` iterations of a Scan body over `scans` (element t along axes[j], from the end when
// directions[j] is 1).
Result<ScanSteps> scan_steps(KernelContext& ctx, const Graph& body, std::vector<Argument> states,
                             const std::vector<Tensor>& scans, const std::vector<int>& axes,
                             const std::vector<int64_t>& directions, int64_t length) {
  const size_t n = states.size();
  const size_t k = body.outputs().size() - n;
  ScanSteps steps;
  steps.elements.resize(k);
  for (int64_t t = 0; t < length; ++t) {
    std::vector<Argument> inputs = states;
    for (size_t j = 0; j < scans.size(); ++j) {
      const int64_t index = directions[j] != 0 ? length - 1 - t : t;
      KILN_ASSIGN_OR_RETURN(Tensor element, take_axis(scans[j], axes[j], index));
      inputs.emplace_back(std::move(element));
    }
    KILN_ASSIGN_OR_RETURN(std::vector<Argument> outs, run_body(ctx, body, std::move(inputs)));
    for (size_t i = 0; i < n; ++i) states[i] = std::move(outs[i]);
    for (size_t i = 0; i < k; ++i) {
      if (!outs[n + i].is_tensor()) {
        return ctx.errorf("body output {} (a scan output) must be a tensor, got {}", n + i,
                          outs[n + i].to_string());
      }
      steps.elements[i].push_back(outs[n + i].tensor());
    }
  }
  steps.states = std::move(states);
  return steps;
}

std::vector<int64_t> list_or_zeros(const std::optional<std::vector<int64_t>>& list, size_t size) {
  return list ? *list : std::vector<int64_t>(size, 0);
}

Status run_scan_opset8(const ops::Scan& op, KernelContext& ctx) {
  const Graph& body = *op.body;
  const int m = static_cast<int>(*op.num_scan_inputs);
  const int n = ctx.num_inputs() - 1 - m;
  const int k = static_cast<int>(body.outputs().size()) - n;
  const Tensor& first_scan = ctx.input(1 + n);
  const int64_t batch = first_scan.shape()[0];
  const int64_t max_len = first_scan.shape()[1];
  for (int j = 0; j < m; ++j) {
    const Shape& s = ctx.input(1 + n + j).shape();
    if (s[0] != batch || s[1] != max_len) {
      return ctx.errorf("scan inputs must agree on batch and sequence length, got {} and {}",
                        first_scan.shape().to_string(), s.to_string());
    }
  }
  for (int i = 0; i < n; ++i) {
    if (ctx.input(1 + i).rank() < 1 || ctx.input(1 + i).shape()[0] != batch) {
      return ctx.errorf("state input {} must have the batch size {} as its first dim, got {}",
                        1 + i, batch, ctx.input(1 + i).shape().to_string());
    }
  }
  std::vector<int64_t> lengths(static_cast<size_t>(batch), max_len);
  if (ctx.has_input(0)) {
    lengths = tensor_to_ints(ctx.input(0));
    if (static_cast<int64_t>(lengths.size()) != batch) {
      return ctx.errorf("sequence_lens must have {} values, got {}", batch, lengths.size());
    }
    for (int64_t len : lengths) {
      if (len < 0 || len > max_len) {
        return ctx.errorf("sequence lengths must be in [0, {}], got {}", max_len, len);
      }
    }
  }
  const std::vector<int64_t> directions = list_or_zeros(op.scan_input_directions, m);
  const std::vector<int> axes(static_cast<size_t>(m), 0);
  std::vector<std::vector<Tensor>> states_out(static_cast<size_t>(n));
  std::vector<std::vector<Tensor>> scans_out(static_cast<size_t>(k));
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<Argument> states;
    std::vector<Tensor> scans;
    for (int i = 0; i < n; ++i) {
      KILN_ASSIGN_OR_RETURN(Tensor s, take_axis(ctx.input(1 + i), 0, b));
      states.emplace_back(std::move(s));
    }
    for (int j = 0; j < m; ++j) {
      KILN_ASSIGN_OR_RETURN(Tensor s, take_axis(ctx.input(1 + n + j), 0, b));
      scans.push_back(std::move(s));
    }
    const int64_t len = lengths[static_cast<size_t>(b)];
    KILN_ASSIGN_OR_RETURN(ScanSteps steps,
                          scan_steps(ctx, body, std::move(states), scans, axes, directions, len));
    for (int i = 0; i < n; ++i) {
      if (!steps.states[static_cast<size_t>(i)].is_tensor()) {
        return ctx.errorf("body output {} (a state) must be a tensor", i);
      }
      states_out[static_cast<size_t>(i)].push_back(steps.states[static_cast<size_t>(i)].tensor());
    }
    for (int i = 0; i < k; ++i) {
      std::vector<Tensor>& elements = steps.elements[static_cast<size_t>(i)];
      Tensor padded;
      if (elements.empty()) {
        KILN_ASSIGN_OR_RETURN(
            padded, empty_scan_output(ctx, *body.outputs()[static_cast<size_t>(n + i)], 0));
        std::vector<int64_t> dims = padded.shape().dims();
        dims[0] = max_len;
        KILN_ASSIGN_OR_RETURN(padded, Tensor::allocate(padded.dtype(), Shape(std::move(dims))));
      } else {
        KILN_ASSIGN_OR_RETURN(Tensor zeros,
                              Tensor::allocate(elements[0].dtype(), elements[0].shape()));
        elements.resize(static_cast<size_t>(max_len), zeros);
        Result<Tensor> stacked = stack_axis(elements, 0);
        if (!stacked.ok()) return ctx.errorf("scan output {}: {}", i, stacked.status().message());
        padded = std::move(stacked).value();
      }
      scans_out[static_cast<size_t>(i)].push_back(std::move(padded));
    }
  }
  for (int i = 0; i < n + k && i < ctx.num_outputs(); ++i) {
    const auto& parts =
        i < n ? states_out[static_cast<size_t>(i)] : scans_out[static_cast<size_t>(i - n)];
    if (parts.empty()) {
      // A batch of 0: the input's shape for a state, the body's for a scan output.
      if (i < n) {
        ctx.set_output(i, ctx.input_arg(1 + i));
        continue;
      }
      KILN_ASSIGN_OR_RETURN(Tensor empty,
                            empty_scan_output(ctx, *body.outputs()[static_cast<size_t>(i)], 0));
      std::vector<int64_t> dims = empty.shape().dims();
      dims.insert(dims.begin(), 0);
      dims[1] = max_len;
      KILN_ASSIGN_OR_RETURN(empty, Tensor::allocate(empty.dtype(), Shape(std::move(dims))));
      ctx.set_output(i, std::move(empty));
      continue;
    }
    Result<Tensor> stacked = stack_axis(parts, 0);
    if (!stacked.ok()) return ctx.errorf("output {}: {}", i, stacked.status().message());
    ctx.set_output(i, std::move(stacked).value());
  }
  return Status();
}

}  // namespace

template <>
Status run_op(const ops::If& op, KernelContext& ctx) {
  KILN_ASSIGN_OR_RETURN(bool cond, read_bool(ctx, ctx.input_arg(0), "the condition"));
  KILN_ASSIGN_OR_RETURN(std::vector<Argument> outs,
                        run_body(ctx, cond ? *op.then_branch : *op.else_branch, {}));
  for (int i = 0; i < ctx.num_outputs(); ++i)
    ctx.set_output(i, std::move(outs[static_cast<size_t>(i)]));
  return Status();
}

template <>
Status run_op(const ops::Loop& op, KernelContext& ctx) {
  const Graph& body = *op.body;
  const int n = ctx.num_inputs() - 2;
  const int k = static_cast<int>(body.outputs().size()) - 1 - n;
  const int64_t max_trips =
      ctx.has_input(0) ? tensor_to_ints(ctx.input(0))[0] : std::numeric_limits<int64_t>::max();
  bool cond = true;
  if (ctx.has_input(1)) {
    KILN_ASSIGN_OR_RETURN(cond, read_bool(ctx, ctx.input_arg(1), "the condition"));
  }
  std::vector<Argument> carried;
  for (int i = 0; i < n; ++i) carried.push_back(input_or_none(ctx, 2 + i));
  std::vector<std::vector<Tensor>> scans(static_cast<size_t>(k));
  for (int64_t it = 0; it < max_trips && cond; ++it) {
    std::vector<Argument> inputs{Tensor::scalar<int64_t>(it), Tensor::scalar<bool>(cond)};
    inputs.insert(inputs.end(), carried.begin(), carried.end());
    KILN_ASSIGN_OR_RETURN(std::vector<Argument> outs, run_body(ctx, body, std::move(inputs)));
    KILN_ASSIGN_OR_RETURN(cond, read_bool(ctx, outs[0], "body output 0 (the condition)"));
    for (int i = 0; i < n; ++i)
      carried[static_cast<size_t>(i)] = std::move(outs[static_cast<size_t>(1 + i)]);
    for (int i = 0; i < k; ++i) {
      const Argument& s = outs[static_cast<size_t>(1 + n + i)];
      if (!s.is_tensor()) {
        return ctx.errorf("body output {} (a scan output) must be a tensor, got {}", 1 + n + i,
                          s.to_string());
      }
      scans[static_cast<size_t>(i)].push_back(s.tensor());
    }
  }
  for (int i = 0; i < n && i < ctx.num_outputs(); ++i)
    ctx.set_output(i, std::move(carried[static_cast<size_t>(i)]));
  for (int i = 0; i < k && n + i < ctx.num_outputs(); ++i) {
    const std::vector<Tensor>& parts = scans[static_cast<size_t>(i)];
    if (parts.empty()) {
      KILN_ASSIGN_OR_RETURN(
          Tensor empty, empty_scan_output(ctx, *body.outputs()[static_cast<size_t>(1 + n + i)], 0));
      ctx.set_output(n + i, std::move(empty));
      continue;
    }
    Result<Tensor> stacked = stack_axis(parts, 0);
    if (!stacked.ok()) return ctx.errorf("scan output {}: {}", i, stacked.status().message());
    ctx.set_output(n + i, std::move(stacked).value());
  }
  return Status();
}

template <>
Status run_op(const ops::Scan& op, KernelContext& ctx) {
  if (op.opset8_batched != 0) return run_scan_opset8(op, ctx);
  const Graph& body = *op.body;
  const int m = static_cast<int>(*op.num_scan_inputs);
  const int n = ctx.num_inputs() - m;
  const int k = static_cast<int>(body.outputs().size()) - n;
  const std::vector<int64_t> in_axes = list_or_zeros(op.scan_input_axes, m);
  const std::vector<int64_t> out_axes = list_or_zeros(op.scan_output_axes, k);
  const std::vector<int64_t> out_directions = list_or_zeros(op.scan_output_directions, k);
  std::vector<Tensor> scans;
  std::vector<int> axes;
  int64_t length = -1;
  for (int j = 0; j < m; ++j) {
    const Tensor& x = ctx.input(n + j);
    KILN_ASSIGN_OR_RETURN(int axis, normalize_axis(in_axes[static_cast<size_t>(j)], x.rank()));
    if (length >= 0 && x.shape()[axis] != length) {
      return ctx.errorf("scan inputs must have one sequence length, got {} and {}", length,
                        x.shape()[axis]);
    }
    length = x.shape()[axis];
    scans.push_back(x);
    axes.push_back(axis);
  }
  std::vector<Argument> states;
  for (int i = 0; i < n; ++i) states.push_back(input_or_none(ctx, i));
  KILN_ASSIGN_OR_RETURN(ScanSteps steps,
                        scan_steps(ctx, body, std::move(states), scans, axes,
                                   list_or_zeros(op.scan_input_directions, m), length));
  for (int i = 0; i < n && i < ctx.num_outputs(); ++i)
    ctx.set_output(i, std::move(steps.states[static_cast<size_t>(i)]));
  for (int i = 0; i < k && n + i < ctx.num_outputs(); ++i) {
    std::vector<Tensor>& parts = steps.elements[static_cast<size_t>(i)];
    if (out_directions[static_cast<size_t>(i)] != 0) std::reverse(parts.begin(), parts.end());
    const Value& body_out = *body.outputs()[static_cast<size_t>(n + i)];
    const int elem_rank = parts.empty() ? body_out.type().tensor().rank() : parts[0].rank();
    KILN_ASSIGN_OR_RETURN(int axis,
                          normalize_axis(out_axes[static_cast<size_t>(i)], elem_rank + 1));
    if (parts.empty()) {
      KILN_ASSIGN_OR_RETURN(Tensor empty, empty_scan_output(ctx, body_out, axis));
      ctx.set_output(n + i, std::move(empty));
      continue;
    }
    Result<Tensor> stacked = stack_axis(parts, axis);
    if (!stacked.ok()) return ctx.errorf("scan output {}: {}", i, stacked.status().message());
    ctx.set_output(n + i, std::move(stacked).value());
  }
  return Status();
}

template <>
Status run_op(const ops::SequenceMap& op, KernelContext& ctx) {
  const std::vector<Tensor>& first = ctx.input_arg(0).sequence();
  const size_t length = first.size();
  for (int j = 1; j < ctx.num_inputs(); ++j) {
    const Argument& a = ctx.input_arg(j);
    if (a.is_sequence() && a.sequence().size() != length) {
      return ctx.errorf("input {} holds {} elements, input 0 holds {}", j, a.sequence().size(),
                        length);
    }
  }
  std::vector<std::vector<Tensor>> outs(static_cast<size_t>(ctx.num_outputs()));
  for (size_t e = 0; e < length; ++e) {
    std::vector<Argument> inputs;
    for (int j = 0; j < ctx.num_inputs(); ++j) {
      const Argument& a = ctx.input_arg(j);
      inputs.push_back(a.is_sequence() ? Argument(a.sequence()[e]) : a);
    }
    KILN_ASSIGN_OR_RETURN(std::vector<Argument> results,
                          run_body(ctx, *op.body, std::move(inputs)));
    for (int i = 0; i < ctx.num_outputs(); ++i) {
      const Argument& r = results[static_cast<size_t>(i)];
      if (!r.is_tensor()) {
        return ctx.errorf("body output {} must be a tensor, got {}", i, r.to_string());
      }
      outs[static_cast<size_t>(i)].push_back(r.tensor());
    }
  }
  for (int i = 0; i < ctx.num_outputs(); ++i) {
    ctx.set_output(i, Argument::sequence(std::move(outs[static_cast<size_t>(i)])));
  }
  return Status();
}

}  // namespace kiln::compiler::ref
