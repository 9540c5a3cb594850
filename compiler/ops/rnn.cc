// SPDX-License-Identifier: Apache-2.0
// Type and shape inference for the rnn op family: RNN, GRU and LSTM share one shape contract.
#include "compiler/ops/rnn.h"

#include <string_view>

#include "compiler/ops/infer.h"
#include "compiler/ops/infer_util.h"
#include "compiler/ops/rnn_activation.h"

namespace kiln::compiler {

namespace {

// Unifies `d` into `agreed` (a dim several inputs share), or fails naming both values.
Status agree(const InferContext& ctx, Dim& agreed, const Dim& d, std::string_view what) {
  if (!d.known()) return Status();
  if (agreed.known() && agreed.value != d.value) {
    return ctx.errorf("inputs disagree on {}: {} and {}", what, agreed.value, d.value);
  }
  agreed = d;
  return Status();
}

// Checks input i, when present, against `expected` dims (unknown dims match anything); a mismatch
// is an error naming the input.
Status check_input(const InferContext& ctx, int i, std::string_view name, DType dtype,
                   const std::vector<Dim>& expected) {
  if (!ctx.has_input(i)) return Status();
  KILN_RETURN_IF_ERROR(ctx.require_input(i, static_cast<int>(expected.size())));
  const TensorType& t = ctx.input(i);
  if (t.dtype != dtype) {
    return ctx.errorf("{} must be {}, got {}", name, dtype_name(dtype), t.to_string());
  }
  if (!t.has_rank()) return Status();
  for (size_t d = 0; d < expected.size(); ++d) {
    const Dim& a = (*t.dims)[d];
    const Dim& e = expected[d];
    if (a.known() && e.known() && a.value != e.value) {
      std::vector<Dim> shown = expected;
      return ctx.errorf("{} must have shape {}, got {}", name,
                        TensorType(dtype, std::move(shown)).to_string(), t.to_string());
    }
  }
  return Status();
}

Dim dim_of(const TensorType& t, int d) {
  return t.has_rank() ? (*t.dims)[static_cast<size_t>(d)] : Dim();
}

Dim times(const Dim& d, int64_t k) {
  return d.known() ? Dim(d.value * k) : Dim();
}

template <class Op>
InferResult infer_recurrent(const Op& op, const InferContext& ctx) {
  constexpr int kGates = Op::kGates;
  constexpr bool kLstm = std::is_same_v<Op, ops::LSTM>;
  for (int i = 0; i < 3; ++i) KILN_RETURN_IF_ERROR(ctx.require_input(i, 3));
  const TensorType& x = ctx.input(0);
  const TensorType& w = ctx.input(1);
  const TensorType& r = ctx.input(2);
  if (!dtype_is_float(x.dtype)) {
    return ctx.errorf("X must be a float tensor, got {}", x.to_string());
  }
  if (w.dtype != x.dtype || r.dtype != x.dtype) {
    return ctx.errorf("X, W and R must share one dtype, got {}, {} and {}", x.to_string(),
                      w.to_string(), r.to_string());
  }
  int64_t num_directions = 1;
  if (op.direction == "bidirectional") {
    num_directions = 2;
  } else if (op.direction != "forward" && op.direction != "reverse") {
    return ctx.errorf("direction must be forward, reverse or bidirectional, got \"{}\"",
                      op.direction);
  }
  if (op.layout != 0 && op.layout != 1) {
    return ctx.errorf("layout must be 0 or 1, got {}", op.layout);
  }
  if (op.clip && !(*op.clip > 0.0f)) return ctx.errorf("clip must be positive, got {}", *op.clip);
  if constexpr (std::is_same_v<Op, ops::GRU>) {
    if (op.linear_before_reset != 0 && op.linear_before_reset != 1) {
      return ctx.errorf("linear_before_reset must be 0 or 1, got {}", op.linear_before_reset);
    }
  }
  if constexpr (kLstm) {
    if (op.input_forget != 0 && op.input_forget != 1) {
      return ctx.errorf("input_forget must be 0 or 1, got {}", op.input_forget);
    }
  }
  Result<std::vector<RnnActivation>> acts =
      resolve_rnn_activations(op.activations, op.activation_alpha, op.activation_beta,
                              Op::kDefaultActivations, static_cast<int>(num_directions));
  if (!acts.ok()) return ctx.error(acts.status().message());

  Dim seq = dim_of(x, op.layout == 0 ? 0 : 1);
  Dim batch = dim_of(x, op.layout == 0 ? 1 : 0);
  Dim input_size = dim_of(x, 2);
  Dim hidden = op.hidden_size ? Dim(*op.hidden_size) : Dim();
  if (op.hidden_size && *op.hidden_size <= 0) {
    return ctx.errorf("hidden_size must be positive, got {}", *op.hidden_size);
  }
  KILN_RETURN_IF_ERROR(agree(ctx, hidden, dim_of(r, 2), "hidden_size"));
  if (!hidden.known() && dim_of(r, 1).known()) hidden = Dim(dim_of(r, 1).value / kGates);
  const Dim nd(num_directions);
  const Dim gates = times(hidden, kGates);
  KILN_RETURN_IF_ERROR(check_input(ctx, 1, "W", x.dtype, {nd, gates, input_size}));
  KILN_RETURN_IF_ERROR(check_input(ctx, 2, "R", x.dtype, {nd, gates, hidden}));
  KILN_RETURN_IF_ERROR(check_input(ctx, 3, "B", x.dtype, {nd, times(hidden, 2 * kGates)}));
  if (ctx.has_input(4)) {
    KILN_RETURN_IF_ERROR(ctx.require_input(4, 1));
    const TensorType& lens = ctx.input(4);
    if (lens.dtype != DType::kI32 && lens.dtype != DType::kI64) {
      return ctx.errorf("sequence_lens must be i32 or i64, got {}", lens.to_string());
    }
    KILN_RETURN_IF_ERROR(agree(ctx, batch, dim_of(lens, 0), "the batch size"));
  }
  const std::vector<Dim> state =
      op.layout == 0 ? std::vector<Dim>{nd, batch, hidden} : std::vector<Dim>{batch, nd, hidden};
  KILN_RETURN_IF_ERROR(check_input(ctx, 5, "initial_h", x.dtype, state));
  const int max_inputs = kLstm ? 8 : 6;
  if (ctx.num_inputs() > max_inputs) {
    return ctx.errorf("expected at most {} inputs, got {}", max_inputs, ctx.num_inputs());
  }
  if constexpr (kLstm) {
    KILN_RETURN_IF_ERROR(check_input(ctx, 6, "initial_c", x.dtype, state));
    KILN_RETURN_IF_ERROR(check_input(ctx, 7, "P", x.dtype, {nd, times(hidden, 3)}));
  }
  const int max_outputs = kLstm ? 3 : 2;
  if (ctx.num_outputs() > max_outputs) {
    return ctx.errorf("expected at most {} outputs, got {}", max_outputs, ctx.num_outputs());
  }
  std::vector<ValueType> out;
  out.push_back(TensorType(x.dtype, op.layout == 0 ? std::vector<Dim>{seq, nd, batch, hidden}
                                                   : std::vector<Dim>{batch, seq, nd, hidden}));
  out.push_back(TensorType(x.dtype, state));
  if (kLstm) out.push_back(TensorType(x.dtype, state));
  return out;
}

}  // namespace

template <>
InferResult infer_op(const ops::RNN& op, const InferContext& ctx) {
  return infer_recurrent(op, ctx);
}

template <>
InferResult infer_op(const ops::GRU& op, const InferContext& ctx) {
  return infer_recurrent(op, ctx);
}

template <>
InferResult infer_op(const ops::LSTM& op, const InferContext& ctx) {
  return infer_recurrent(op, ctx);
}

}  // namespace kiln::compiler
