// SPDX-License-Identifier: Apache-2.0
// Type and shape inference for the control op family: If, Loop, Scan, sequences and optionals.
#include "compiler/ops/control.h"

#include <algorithm>

#include "compiler/ops/infer.h"
#include "compiler/ops/infer_util.h"

namespace kiln::compiler {

namespace {

// The most precise type covering both `a` and `b` (two If branches, the values a loop-carried
// variable takes); nullopt when their kinds or element types differ.
std::optional<ValueType> merge_types(const ValueType& a, const ValueType& b) {
  if (a.kind() != b.kind()) return std::nullopt;
  if (a.is_tensor()) {
    const TensorType& x = a.tensor();
    const TensorType& y = b.tensor();
    if (x.dtype != y.dtype) return std::nullopt;
    if (!x.has_rank() || !y.has_rank() || x.rank() != y.rank()) {
      return ValueType(TensorType::unranked(x.dtype));
    }
    std::vector<Dim> dims;
    for (size_t i = 0; i < x.dims->size(); ++i) {
      const Dim& dx = (*x.dims)[i];
      dims.push_back(dx == (*y.dims)[i] ? dx : Dim());
    }
    return ValueType(TensorType(x.dtype, std::move(dims)));
  }
  std::optional<ValueType> element = merge_types(a.element(), b.element());
  if (!element) return std::nullopt;
  return a.kind() == ValueType::Kind::kSequence ? ValueType::sequence(std::move(*element))
                                                : ValueType::optional(std::move(*element));
}

// A loop-carried or state output: the body's output type, widened by the initial value's type
// when both have the same kind (the body may change a variable's kind, e.g. optional to
// sequence; at run time a present optional arrives as its element).
ValueType carried_type(const ValueType& initial, const ValueType& body_out) {
  std::optional<ValueType> merged = merge_types(initial, body_out);
  return merged ? *merged : body_out;
}

// Fails unless input i is present, a tensor of `dtype` (nullopt: any integer type), and holds a
// single element when its shape is known.
Status require_scalar(const InferContext& ctx, int i, std::string_view what,
                      std::optional<DType> dtype) {
  KILN_RETURN_IF_ERROR(ctx.require_input(i));
  const TensorType& t = ctx.input(i);
  if (dtype ? t.dtype != *dtype : t.dtype != DType::kI32 && t.dtype != DType::kI64) {
    return ctx.errorf("{} must be {}, got {}", what,
                      dtype ? dtype_name(*dtype) : std::string_view("i32 or i64"), t.to_string());
  }
  if (t.is_static() && t.shape().numel() != 1) {
    return ctx.errorf("{} must hold one element, got {}", what, t.to_string());
  }
  return Status();
}

Status require_sequence(const InferContext& ctx, int i) {
  if (!ctx.has_input(i)) return ctx.errorf("input {} is required", i);
  const ValueType& t = ctx.input_type(i);
  if (t.kind() != ValueType::Kind::kSequence || !t.element().is_tensor()) {
    return ctx.errorf("input {} must be a sequence of tensors, got {}", i, t.to_string());
  }
  return Status();
}

// The element tensor type of sequence input i.
const TensorType& sequence_element(const InferContext& ctx, int i) {
  return ctx.input_type(i).element().tensor();
}

Status require_graph(const InferContext& ctx, const GraphAttr& graph, std::string_view name,
                     int num_inputs, int num_outputs) {
  if (graph == nullptr) return ctx.errorf("attribute \"{}\" is required", name);
  const int ins = static_cast<int>(graph->inputs().size());
  const int outs = static_cast<int>(graph->outputs().size());
  if (num_inputs >= 0 && ins != num_inputs) {
    return ctx.errorf("{} must take {} inputs, got {}", name, num_inputs, ins);
  }
  if (num_outputs >= 0 && outs != num_outputs) {
    return ctx.errorf("{} must return {} outputs, got {}", name, num_outputs, outs);
  }
  return Status();
}

// Unifies `d` into `agreed`, a length the scan inputs share.
Status agree(const InferContext& ctx, Dim& agreed, const Dim& d) {
  if (!d.known()) return Status();
  if (agreed.known() && agreed.value != d.value) {
    return ctx.errorf("scan inputs disagree on a length: {} and {}", agreed.value, d.value);
  }
  agreed = d;
  return Status();
}

// `dims` with `d` inserted at `axis` (0 <= axis <= dims.size()).
std::vector<Dim> insert_dim(std::vector<Dim> dims, int axis, Dim d) {
  dims.insert(dims.begin() + axis, std::move(d));
  return dims;
}

}  // namespace

template <>
InferResult infer_op(const ops::If& op, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(require_scalar(ctx, 0, "the condition", DType::kBool));
  KILN_RETURN_IF_ERROR(require_graph(ctx, op.then_branch, "then_branch", 0, ctx.num_outputs()));
  KILN_RETURN_IF_ERROR(require_graph(ctx, op.else_branch, "else_branch", 0, ctx.num_outputs()));
  const Tensor* cond = ctx.input_value(0);
  std::vector<ValueType> out;
  for (int i = 0; i < ctx.num_outputs(); ++i) {
    const ValueType& a = op.then_branch->outputs()[static_cast<size_t>(i)]->type();
    const ValueType& b = op.else_branch->outputs()[static_cast<size_t>(i)]->type();
    std::optional<ValueType> merged = merge_types(a, b);
    if (!merged) {
      return ctx.errorf("output {}: then_branch gives {} but else_branch gives {}", i,
                        a.to_string(), b.to_string());
    }
    if (cond != nullptr) {
      out.push_back(tensor_to_ints(*cond)[0] != 0 ? a : b);
    } else {
      out.push_back(std::move(*merged));
    }
  }
  return out;
}

template <>
InferResult infer_op(const ops::Loop& op, const InferContext& ctx) {
  if (ctx.num_inputs() < 2) {
    return ctx.errorf("expected at least 2 inputs, got {}", ctx.num_inputs());
  }
  if (ctx.has_input(0)) {
    KILN_RETURN_IF_ERROR(require_scalar(ctx, 0, "the trip count M", DType::kI64));
  }
  if (ctx.has_input(1)) {
    KILN_RETURN_IF_ERROR(require_scalar(ctx, 1, "the condition", DType::kBool));
  }
  const int n = ctx.num_inputs() - 2;
  KILN_RETURN_IF_ERROR(require_graph(ctx, op.body, "body", n + 2, -1));
  const int k = static_cast<int>(op.body->outputs().size()) - 1 - n;
  if (k < 0) {
    return ctx.errorf("body must return the condition and {} loop-carried values, got {} outputs",
                      n, op.body->outputs().size());
  }
  if (ctx.num_outputs() > n + k) {
    return ctx.errorf("expected at most {} outputs, got {}", n + k, ctx.num_outputs());
  }
  const ValueType& body_cond = op.body->outputs()[0]->type();
  if (!body_cond.is_tensor() || body_cond.tensor().dtype != DType::kBool) {
    return ctx.errorf("body output 0 (the condition) must be bool, got {}", body_cond.to_string());
  }
  std::vector<ValueType> out;
  for (int i = 0; i < n; ++i) {
    if (!ctx.has_input(2 + i)) return ctx.errorf("loop-carried input {} is required", 2 + i);
    out.push_back(carried_type(ctx.input_type(2 + i),
                               op.body->outputs()[static_cast<size_t>(1 + i)]->type()));
  }
  for (int i = 0; i < k; ++i) {
    const ValueType& t = op.body->outputs()[static_cast<size_t>(1 + n + i)]->type();
    if (!t.is_tensor()) {
      return ctx.errorf("body output {} (a scan output) must be a tensor, got {}", 1 + n + i,
                        t.to_string());
    }
    const TensorType& e = t.tensor();
    out.push_back(e.has_rank() ? TensorType(e.dtype, insert_dim(*e.dims, 0, Dim()))
                               : TensorType::unranked(e.dtype));
  }
  return out;
}

template <>
InferResult infer_op(const ops::Scan& op, const InferContext& ctx) {
  if (!op.num_scan_inputs) return ctx.error("attribute \"num_scan_inputs\" is required");
  const bool batched = op.opset8_batched != 0;
  const int first = batched ? 1 : 0;  // opset 8: input 0 is sequence_lens
  const int m = static_cast<int>(*op.num_scan_inputs);
  const int n = ctx.num_inputs() - first - m;
  if (m < 1 || n < 0) {
    return ctx.errorf("num_scan_inputs must be in [1, {}], got {}", ctx.num_inputs() - first, m);
  }
  KILN_RETURN_IF_ERROR(require_graph(ctx, op.body, "body", n + m, -1));
  const int k = static_cast<int>(op.body->outputs().size()) - n;
  if (k < 0) return ctx.errorf("body must return at least {} state values", n);
  if (ctx.num_outputs() > n + k) {
    return ctx.errorf("expected at most {} outputs, got {}", n + k, ctx.num_outputs());
  }
  auto check_list = [&](const std::optional<std::vector<int64_t>>& list, std::string_view name,
                        int size) -> Status {
    if (list && static_cast<int>(list->size()) != size) {
      return ctx.errorf("attribute \"{}\" must have {} values, got {}", name, size, list->size());
    }
    return Status();
  };
  KILN_RETURN_IF_ERROR(check_list(op.scan_input_axes, "scan_input_axes", m));
  KILN_RETURN_IF_ERROR(check_list(op.scan_input_directions, "scan_input_directions", m));
  KILN_RETURN_IF_ERROR(check_list(op.scan_output_axes, "scan_output_axes", k));
  KILN_RETURN_IF_ERROR(check_list(op.scan_output_directions, "scan_output_directions", k));
  for (const auto* dirs : {&op.scan_input_directions, &op.scan_output_directions}) {
    if (!*dirs) continue;
    for (int64_t d : **dirs) {
      if (d != 0 && d != 1) return ctx.errorf("scan directions must be 0 or 1, got {}", d);
    }
  }
  if (batched && (op.scan_input_axes || op.scan_output_axes || op.scan_output_directions)) {
    return ctx.error("the opset-8 form takes no scan axes or output directions");
  }
  if (batched && ctx.has_input(0)) {
    KILN_RETURN_IF_ERROR(ctx.require_input(0, 1));
    if (ctx.input(0).dtype != DType::kI64 && ctx.input(0).dtype != DType::kI32) {
      return ctx.errorf("sequence_lens must be i32 or i64, got {}", ctx.input(0).to_string());
    }
  }

  // The sequence length (and, batched, the batch size) the scan inputs agree on.
  Dim seq_len, batch;
  for (int j = 0; j < m; ++j) {
    const int in = first + n + j;
    KILN_RETURN_IF_ERROR(ctx.require_input(in));
    const TensorType& t = ctx.input(in);
    if (!t.has_rank()) continue;
    int axis = 1;
    if (!batched) {
      int64_t a = op.scan_input_axes ? (*op.scan_input_axes)[static_cast<size_t>(j)] : 0;
      Result<int> normalized = normalize_axis(a, t.rank());
      if (!normalized.ok()) {
        return ctx.errorf("scan input {}: axis {} is out of range for {}", j, a, t.to_string());
      }
      axis = *normalized;
    } else if (t.rank() < 2) {
      return ctx.errorf("scan input {} must have a batch and a sequence axis, got {}", j,
                        t.to_string());
    }
    KILN_RETURN_IF_ERROR(agree(ctx, seq_len, (*t.dims)[static_cast<size_t>(axis)]));
    if (batched) KILN_RETURN_IF_ERROR(agree(ctx, batch, (*t.dims)[0]));
  }

  std::vector<ValueType> out;
  for (int i = 0; i < n; ++i) {
    KILN_RETURN_IF_ERROR(ctx.require_input(first + i));
    const ValueType& body_out = op.body->outputs()[static_cast<size_t>(i)]->type();
    if (!body_out.is_tensor()) return ctx.errorf("body output {} must be a tensor", i);
    out.push_back(batched ? ValueType(ctx.input(first + i))
                          : carried_type(ctx.input_type(first + i), body_out));
  }
  for (int i = 0; i < k; ++i) {
    const ValueType& t = op.body->outputs()[static_cast<size_t>(n + i)]->type();
    if (!t.is_tensor()) {
      return ctx.errorf("body output {} (a scan output) must be a tensor, got {}", n + i,
                        t.to_string());
    }
    const TensorType& e = t.tensor();
    if (!e.has_rank()) {
      out.push_back(TensorType::unranked(e.dtype));
      continue;
    }
    if (batched) {
      out.push_back(TensorType(e.dtype, insert_dim(insert_dim(*e.dims, 0, seq_len), 0, batch)));
      continue;
    }
    int64_t a = op.scan_output_axes ? (*op.scan_output_axes)[static_cast<size_t>(i)] : 0;
    Result<int> axis = normalize_axis(a, e.rank() + 1);
    if (!axis.ok()) {
      return ctx.errorf("scan output {}: axis {} is out of range for rank {}", i, a, e.rank() + 1);
    }
    out.push_back(TensorType(e.dtype, insert_dim(*e.dims, *axis, seq_len)));
  }
  return out;
}

template <>
InferResult infer_op(const ops::SequenceAt&, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(require_sequence(ctx, 0));
  KILN_RETURN_IF_ERROR(require_scalar(ctx, 1, "the position", std::nullopt));
  return std::vector<ValueType>{sequence_element(ctx, 0)};
}

template <>
InferResult infer_op(const ops::SequenceConstruct&, const InferContext& ctx) {
  if (ctx.num_inputs() < 1) return ctx.error("expected at least one input");
  std::optional<ValueType> element;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    KILN_RETURN_IF_ERROR(ctx.require_input(i));
    std::optional<ValueType> merged =
        element ? merge_types(*element, ctx.input(i)) : std::optional<ValueType>(ctx.input(i));
    if (!merged) {
      return ctx.errorf("inputs must share one element type: {} and {}", element->to_string(),
                        ctx.input(i).to_string());
    }
    element = std::move(merged);
  }
  return std::vector<ValueType>{ValueType::sequence(std::move(*element))};
}

template <>
InferResult infer_op(const ops::SequenceEmpty& op, const InferContext&) {
  return std::vector<ValueType>{
      ValueType::sequence(TensorType::unranked(op.dtype.value_or(DType::kF32)))};
}

template <>
InferResult infer_op(const ops::SequenceErase&, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(require_sequence(ctx, 0));
  if (ctx.has_input(1)) {
    KILN_RETURN_IF_ERROR(require_scalar(ctx, 1, "the position", std::nullopt));
  }
  return std::vector<ValueType>{ctx.input_type(0)};
}

template <>
InferResult infer_op(const ops::SequenceInsert&, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(require_sequence(ctx, 0));
  KILN_RETURN_IF_ERROR(ctx.require_input(1));
  if (ctx.has_input(2)) {
    KILN_RETURN_IF_ERROR(require_scalar(ctx, 2, "the position", std::nullopt));
  }
  const TensorType& element = sequence_element(ctx, 0);
  if (element.dtype != ctx.input(1).dtype) {
    return ctx.errorf("the tensor must have the sequence's element type {}, got {}",
                      dtype_name(element.dtype), ctx.input(1).to_string());
  }
  return std::vector<ValueType>{ValueType::sequence(*merge_types(element, ctx.input(1)))};
}

template <>
InferResult infer_op(const ops::SequenceLength&, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(require_sequence(ctx, 0));
  return std::vector<ValueType>{TensorType(DType::kI64, std::vector<Dim>{})};
}

template <>
InferResult infer_op(const ops::SequenceMap& op, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(require_sequence(ctx, 0));
  KILN_RETURN_IF_ERROR(require_graph(ctx, op.body, "body", ctx.num_inputs(), ctx.num_outputs()));
  for (int i = 1; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) return ctx.errorf("input {} is required", i);
    ValueType::Kind kind = ctx.input_type(i).kind();
    if (kind != ValueType::Kind::kTensor && kind != ValueType::Kind::kSequence) {
      return ctx.errorf("input {} must be a tensor or a sequence, got {}", i,
                        ctx.input_type(i).to_string());
    }
  }
  std::vector<ValueType> out;
  for (int i = 0; i < ctx.num_outputs(); ++i) {
    const ValueType& t = op.body->outputs()[static_cast<size_t>(i)]->type();
    if (!t.is_tensor()) {
      return ctx.errorf("body output {} must be a tensor, got {}", i, t.to_string());
    }
    out.push_back(ValueType::sequence(t));
  }
  return out;
}

template <>
InferResult infer_op(const ops::SplitToSequence& op, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_input(0));
  const TensorType& x = ctx.input(0);
  if (ctx.has_input(1)) {
    KILN_RETURN_IF_ERROR(ctx.require_input(1));
    const TensorType& s = ctx.input(1);
    if ((s.dtype != DType::kI32 && s.dtype != DType::kI64) || s.rank() > 1) {
      return ctx.errorf("split must be an i32 or i64 scalar or 1-D tensor, got {}", s.to_string());
    }
  }
  if (!x.has_rank()) return std::vector<ValueType>{ValueType::sequence(x)};
  Result<int> normalized = normalize_axis(op.axis, x.rank());
  if (!normalized.ok()) {
    return ctx.errorf("axis {} is out of range for {}", op.axis, x.to_string());
  }
  const int axis = *normalized;
  const Dim dim = (*x.dims)[static_cast<size_t>(axis)];
  std::vector<Dim> dims = *x.dims;
  if (!ctx.has_input(1)) {
    if (op.keepdims == 0) {
      dims.erase(dims.begin() + axis);
    } else {
      dims[static_cast<size_t>(axis)] = Dim(1);
    }
    return std::vector<ValueType>{ValueType::sequence(TensorType(x.dtype, std::move(dims)))};
  }
  Dim chunk;
  if (std::optional<std::vector<int64_t>> split = known_ints(ctx, 1)) {
    for (int64_t s : *split) {
      if (s < 0) return ctx.errorf("split sizes must be non-negative, got {}", s);
    }
    if (ctx.input(1).rank() == 0) {
      if ((*split)[0] <= 0) {
        return ctx.errorf("a scalar split must be positive, got {}", (*split)[0]);
      }
      if (dim.known() && dim.value % (*split)[0] == 0) chunk = Dim((*split)[0]);
    } else {
      int64_t sum = 0;
      for (int64_t s : *split) sum += s;
      if (dim.known() && sum != dim.value) {
        return ctx.errorf("split sizes must sum to the axis length {}, got {}", dim.value, sum);
      }
      if (!split->empty() && std::all_of(split->begin(), split->end(),
                                         [&](int64_t s) { return s == split->front(); })) {
        chunk = Dim(split->front());
      }
    }
  }
  dims[static_cast<size_t>(axis)] = chunk;
  return std::vector<ValueType>{ValueType::sequence(TensorType(x.dtype, std::move(dims)))};
}

template <>
InferResult infer_op(const ops::ConcatFromSequence& op, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(require_sequence(ctx, 0));
  if (!op.axis) return ctx.error("attribute \"axis\" is required");
  if (op.new_axis != 0 && op.new_axis != 1) {
    return ctx.errorf("new_axis must be 0 or 1, got {}", op.new_axis);
  }
  const TensorType& e = sequence_element(ctx, 0);
  if (!e.has_rank()) return std::vector<ValueType>{TensorType::unranked(e.dtype)};
  const int out_rank = e.rank() + static_cast<int>(op.new_axis);
  Result<int> axis = normalize_axis(*op.axis, out_rank);
  if (!axis.ok()) {
    return ctx.errorf("axis {} is out of range for elements {}{}", *op.axis, e.to_string(),
                      op.new_axis ? " with new_axis" : "");
  }
  std::vector<Dim> dims = *e.dims;
  if (op.new_axis) {
    dims.insert(dims.begin() + *axis, Dim());
  } else {
    dims[static_cast<size_t>(*axis)] = Dim();
  }
  return std::vector<ValueType>{TensorType(e.dtype, std::move(dims))};
}

template <>
InferResult infer_op(const ops::Optional& op, const InferContext& ctx) {
  if (ctx.has_input(0)) {
    const ValueType& t = ctx.input_type(0);
    if (t.kind() == ValueType::Kind::kOptional) {
      return ctx.errorf("the input must be a tensor or a sequence, got {}", t.to_string());
    }
    return std::vector<ValueType>{ValueType::optional(t)};
  }
  if (!op.type_dtype) return ctx.error("attribute \"type\" is required without an input");
  TensorType element = TensorType::unranked(*op.type_dtype);
  if (op.type_dims) {
    element.dims.emplace();
    for (int64_t d : *op.type_dims) element.dims->push_back(d >= 0 ? Dim(d) : Dim());
  }
  return std::vector<ValueType>{ValueType::optional(
      op.type_is_sequence ? ValueType::sequence(std::move(element)) : ValueType(element))};
}

template <>
InferResult infer_op(const ops::OptionalGetElement&, const InferContext& ctx) {
  if (!ctx.has_input(0)) return ctx.error("input 0 is required");
  const ValueType& t = ctx.input_type(0);
  // At run time a present optional arrives as its element.
  return std::vector<ValueType>{t.kind() == ValueType::Kind::kOptional ? t.element() : t};
}

template <>
InferResult infer_op(const ops::OptionalHasElement&, const InferContext& ctx) {
  // Without an input (allowed since opset 18) the answer is false.
  return std::vector<ValueType>{TensorType(DType::kBool, std::vector<Dim>{})};
}

}  // namespace kiln::compiler
