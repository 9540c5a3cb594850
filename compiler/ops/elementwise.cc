// SPDX-License-Identifier: Apache-2.0
// Type and shape inference for the elementwise op family.
#include "compiler/ops/elementwise.h"

#include <string_view>

#include "compiler/ops/infer.h"
#include "compiler/ops/infer_util.h"

namespace kiln::compiler {

namespace {

// The element types an input accepts.
enum class Types : uint8_t {
  kFloat,          // f16, bf16, f32, f64
  kSignedNumeric,  // floats and signed integers
  kNumeric,        // floats and integers
  kUnsigned,       // unsigned integers
  kInteger,        // signed and unsigned integers
  kBool,
  kAny,
};

bool accepts(Types types, DType d) {
  switch (types) {
    case Types::kFloat: return dtype_is_float(d);
    case Types::kSignedNumeric: return dtype_is_signed(d);
    case Types::kNumeric: return dtype_is_float(d) || dtype_is_integer(d);
    case Types::kUnsigned: return dtype_is_integer(d) && !dtype_is_signed(d);
    case Types::kInteger: return dtype_is_integer(d);
    case Types::kBool: return d == DType::kBool;
    case Types::kAny: return true;
  }
  return false;
}

std::string_view types_name(Types types) {
  switch (types) {
    case Types::kFloat: return "a float type (f16, bf16, f32, f64)";
    case Types::kSignedNumeric: return "a float or signed integer type";
    case Types::kNumeric: return "a numeric type";
    case Types::kUnsigned: return "an unsigned integer type";
    case Types::kInteger: return "an integer type";
    case Types::kBool: return "bool";
    case Types::kAny: return "any type";
  }
  return "?";
}

Status check_arity(const InferContext& ctx, int min, int max) {
  if (ctx.num_inputs() < min || ctx.num_inputs() > max) {
    if (min == max) return ctx.errorf("expected {} input(s), got {}", min, ctx.num_inputs());
    return ctx.errorf("expected {} to {} inputs, got {}", min, max, ctx.num_inputs());
  }
  return Status();
}

// Input i is a present tensor whose dtype `types` accepts.
Status check_input(const InferContext& ctx, int i, Types types) {
  KILN_RETURN_IF_ERROR(ctx.require_input(i));
  DType d = ctx.input(i).dtype;
  if (!accepts(types, d)) {
    return ctx.errorf("input {} must be {}, got {}", i, types_name(types), dtype_name(d));
  }
  return Status();
}

Status check_same_dtype(const InferContext& ctx, int i, int j) {
  if (ctx.input(i).dtype != ctx.input(j).dtype) {
    return ctx.errorf("inputs {} and {} must have the same element type, got {} and {}", i, j,
                      dtype_name(ctx.input(i).dtype), dtype_name(ctx.input(j).dtype));
  }
  return Status();
}

// One input of an accepted type; the output has its type, or its shape with `out` as dtype.
InferResult unary(const InferContext& ctx, Types types, std::optional<DType> out = std::nullopt) {
  KILN_RETURN_IF_ERROR(check_arity(ctx, 1, 1));
  KILN_RETURN_IF_ERROR(check_input(ctx, 0, types));
  TensorType t = ctx.input(0);
  if (out) t.dtype = *out;
  return std::vector<ValueType>{t};
}

// The multidirectional broadcast of inputs [first, first + count) (all present), with the dtype
// of input `first`.
Result<TensorType> broadcast_inputs(const InferContext& ctx, int first, int count) {
  TensorType t = ctx.input(first);
  for (int i = first + 1; i < first + count; ++i) {
    KILN_ASSIGN_OR_RETURN(t, broadcast_types(ctx, t, ctx.input(i)));
  }
  return t;
}

// Two inputs of one accepted dtype, broadcast; the output has that dtype unless `out` is given.
InferResult binary(const InferContext& ctx, Types types, std::optional<DType> out = std::nullopt) {
  KILN_RETURN_IF_ERROR(check_arity(ctx, 2, 2));
  KILN_RETURN_IF_ERROR(check_input(ctx, 0, types));
  KILN_RETURN_IF_ERROR(check_input(ctx, 1, types));
  KILN_RETURN_IF_ERROR(check_same_dtype(ctx, 0, 1));
  KILN_ASSIGN_OR_RETURN(TensorType t, broadcast_inputs(ctx, 0, 2));
  if (out) t.dtype = *out;
  return std::vector<ValueType>{t};
}

// One or more inputs of one accepted dtype, broadcast together (Max, Min, Mean, Sum).
InferResult variadic(const InferContext& ctx, Types types) {
  if (ctx.num_inputs() < 1) return ctx.error("expected at least 1 input, got 0");
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    KILN_RETURN_IF_ERROR(check_input(ctx, i, types));
    KILN_RETURN_IF_ERROR(check_same_dtype(ctx, 0, i));
  }
  KILN_ASSIGN_OR_RETURN(TensorType t, broadcast_inputs(ctx, 0, ctx.num_inputs()));
  return std::vector<ValueType>{t};
}

}  // namespace

template <>
InferResult infer_op(const ops::Abs&, const InferContext& ctx) {
  return unary(ctx, Types::kNumeric);
}

template <>
InferResult infer_op(const ops::Acos&, const InferContext& ctx) {
  return unary(ctx, Types::kFloat);
}

template <>
InferResult infer_op(const ops::Acosh&, const InferContext& ctx) {
  return unary(ctx, Types::kFloat);
}

template <>
InferResult infer_op(const ops::Asin&, const InferContext& ctx) {
  return unary(ctx, Types::kFloat);
}

template <>
InferResult infer_op(const ops::Asinh&, const InferContext& ctx) {
  return unary(ctx, Types::kFloat);
}

template <>
InferResult infer_op(const ops::Atan&, const InferContext& ctx) {
  return unary(ctx, Types::kFloat);
}

template <>
InferResult infer_op(const ops::Atanh&, const InferContext& ctx) {
  return unary(ctx, Types::kFloat);
}

template <>
InferResult infer_op(const ops::Ceil&, const InferContext& ctx) {
  return unary(ctx, Types::kFloat);
}

template <>
InferResult infer_op(const ops::Cos&, const InferContext& ctx) {
  return unary(ctx, Types::kFloat);
}

template <>
InferResult infer_op(const ops::Cosh&, const InferContext& ctx) {
  return unary(ctx, Types::kFloat);
}

template <>
InferResult infer_op(const ops::Erf&, const InferContext& ctx) {
  return unary(ctx, Types::kNumeric);
}

template <>
InferResult infer_op(const ops::Exp&, const InferContext& ctx) {
  return unary(ctx, Types::kFloat);
}

template <>
InferResult infer_op(const ops::Floor&, const InferContext& ctx) {
  return unary(ctx, Types::kFloat);
}

template <>
InferResult infer_op(const ops::IsInf&, const InferContext& ctx) {
  return unary(ctx, Types::kFloat, DType::kBool);
}

template <>
InferResult infer_op(const ops::IsNaN&, const InferContext& ctx) {
  return unary(ctx, Types::kFloat, DType::kBool);
}

template <>
InferResult infer_op(const ops::Log&, const InferContext& ctx) {
  return unary(ctx, Types::kFloat);
}

template <>
InferResult infer_op(const ops::Neg&, const InferContext& ctx) {
  return unary(ctx, Types::kSignedNumeric);
}

template <>
InferResult infer_op(const ops::Not&, const InferContext& ctx) {
  return unary(ctx, Types::kBool);
}

template <>
InferResult infer_op(const ops::Reciprocal&, const InferContext& ctx) {
  return unary(ctx, Types::kFloat);
}

template <>
InferResult infer_op(const ops::Relu&, const InferContext& ctx) {
  return unary(ctx, Types::kSignedNumeric);
}

template <>
InferResult infer_op(const ops::Round&, const InferContext& ctx) {
  return unary(ctx, Types::kFloat);
}

template <>
InferResult infer_op(const ops::Sigmoid&, const InferContext& ctx) {
  return unary(ctx, Types::kFloat);
}

template <>
InferResult infer_op(const ops::Sign&, const InferContext& ctx) {
  return unary(ctx, Types::kNumeric);
}

template <>
InferResult infer_op(const ops::Sin&, const InferContext& ctx) {
  return unary(ctx, Types::kFloat);
}

template <>
InferResult infer_op(const ops::Sinh&, const InferContext& ctx) {
  return unary(ctx, Types::kFloat);
}

template <>
InferResult infer_op(const ops::Sqrt&, const InferContext& ctx) {
  return unary(ctx, Types::kFloat);
}

template <>
InferResult infer_op(const ops::Tan&, const InferContext& ctx) {
  return unary(ctx, Types::kFloat);
}

template <>
InferResult infer_op(const ops::Tanh&, const InferContext& ctx) {
  return unary(ctx, Types::kFloat);
}

template <>
InferResult infer_op(const ops::Softplus&, const InferContext& ctx) {
  return unary(ctx, Types::kFloat);
}

template <>
InferResult infer_op(const ops::Softsign&, const InferContext& ctx) {
  return unary(ctx, Types::kFloat);
}

template <>
InferResult infer_op(const ops::Celu& op, const InferContext& ctx) {
  if (op.alpha == 0.0f) return ctx.error("attribute alpha must not be 0");
  return unary(ctx, Types::kFloat);
}

template <>
InferResult infer_op(const ops::Elu&, const InferContext& ctx) {
  return unary(ctx, Types::kFloat);
}

template <>
InferResult infer_op(const ops::HardSigmoid&, const InferContext& ctx) {
  return unary(ctx, Types::kFloat);
}

template <>
InferResult infer_op(const ops::HardSwish&, const InferContext& ctx) {
  return unary(ctx, Types::kFloat);
}

template <>
InferResult infer_op(const ops::Gelu& op, const InferContext& ctx) {
  if (op.approximate != "none" && op.approximate != "tanh") {
    return ctx.errorf("expected approximate none or tanh, got \"{}\"", op.approximate);
  }
  return unary(ctx, Types::kFloat);
}

template <>
InferResult infer_op(const ops::Mish&, const InferContext& ctx) {
  return unary(ctx, Types::kFloat);
}

template <>
InferResult infer_op(const ops::Swish&, const InferContext& ctx) {
  return unary(ctx, Types::kFloat);
}

template <>
InferResult infer_op(const ops::SwiGLU&, const InferContext& ctx) {
  KILN_ASSIGN_OR_RETURN(std::vector<ValueType> out, binary(ctx, Types::kFloat));
  const TensorType& a = ctx.input(0);
  const TensorType& b = ctx.input(1);
  if (a.has_rank() && b.has_rank()) {
    bool same = a.rank() == b.rank();
    for (int i = 0; same && i < a.rank(); ++i) {
      const Dim& da = (*a.dims)[static_cast<size_t>(i)];
      const Dim& db = (*b.dims)[static_cast<size_t>(i)];
      same = !da.known() || !db.known() || da.value == db.value;
    }
    if (!same) {
      return ctx.errorf("A {} and B {} must have one shape (SwiGLU does not broadcast)",
                        a.to_string(), b.to_string());
    }
  }
  return out;
}

template <>
InferResult infer_op(const ops::LeakyRelu&, const InferContext& ctx) {
  return unary(ctx, Types::kFloat);
}

template <>
InferResult infer_op(const ops::Selu&, const InferContext& ctx) {
  return unary(ctx, Types::kFloat);
}

template <>
InferResult infer_op(const ops::Shrink&, const InferContext& ctx) {
  return unary(ctx, Types::kNumeric);
}

template <>
InferResult infer_op(const ops::ThresholdedRelu&, const InferContext& ctx) {
  return unary(ctx, Types::kFloat);
}

template <>
InferResult infer_op(const ops::Clip&, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(check_arity(ctx, 1, 3));
  KILN_RETURN_IF_ERROR(check_input(ctx, 0, Types::kNumeric));
  for (int i = 1; i < 3; ++i) {
    if (!ctx.has_input(i)) continue;
    KILN_RETURN_IF_ERROR(check_input(ctx, i, Types::kNumeric));
    KILN_RETURN_IF_ERROR(check_same_dtype(ctx, 0, i));
    const TensorType& b = ctx.input(i);
    if (b.has_rank() && b.rank() != 0 && !(b.rank() == 1 && (*b.dims)[0] == Dim(1))) {
      return ctx.errorf("input {} ({}) must be a scalar, got {}", i, i == 1 ? "min" : "max",
                        b.to_string());
    }
  }
  return std::vector<ValueType>{ctx.input(0)};
}

template <>
InferResult infer_op(const ops::PRelu&, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(check_arity(ctx, 2, 2));
  KILN_RETURN_IF_ERROR(check_input(ctx, 0, Types::kSignedNumeric));
  KILN_RETURN_IF_ERROR(check_input(ctx, 1, Types::kSignedNumeric));
  KILN_RETURN_IF_ERROR(check_same_dtype(ctx, 0, 1));
  const TensorType& x = ctx.input(0);
  const TensorType& slope = ctx.input(1);
  KILN_ASSIGN_OR_RETURN(TensorType b, broadcast_types(ctx, x, slope));
  if (x.is_static() && b.is_static() && !(b.shape() == x.shape())) {
    return ctx.errorf("slope {} must broadcast to the shape of X {}", slope.to_string(),
                      x.to_string());
  }
  if (x.has_rank() && slope.has_rank() && slope.rank() > x.rank()) {
    return ctx.errorf("slope {} has a higher rank than X {}", slope.to_string(), x.to_string());
  }
  return std::vector<ValueType>{x};
}

template <>
InferResult infer_op(const ops::Add&, const InferContext& ctx) {
  return binary(ctx, Types::kNumeric);
}

template <>
InferResult infer_op(const ops::Sub&, const InferContext& ctx) {
  return binary(ctx, Types::kNumeric);
}

template <>
InferResult infer_op(const ops::Mul&, const InferContext& ctx) {
  return binary(ctx, Types::kNumeric);
}

template <>
InferResult infer_op(const ops::Div&, const InferContext& ctx) {
  return binary(ctx, Types::kNumeric);
}

template <>
InferResult infer_op(const ops::Pow&, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(check_arity(ctx, 2, 2));
  KILN_RETURN_IF_ERROR(check_input(ctx, 0, Types::kNumeric));
  KILN_RETURN_IF_ERROR(check_input(ctx, 1, Types::kNumeric));
  KILN_ASSIGN_OR_RETURN(TensorType t, broadcast_inputs(ctx, 0, 2));
  return std::vector<ValueType>{t};
}

template <>
InferResult infer_op(const ops::Mod& op, const InferContext& ctx) {
  if (op.fmod != 0 && op.fmod != 1)
    return ctx.errorf("attribute fmod must be 0 or 1, got {}", op.fmod);
  return binary(ctx, Types::kNumeric);
}

template <>
InferResult infer_op(const ops::And&, const InferContext& ctx) {
  return binary(ctx, Types::kBool);
}

template <>
InferResult infer_op(const ops::Or&, const InferContext& ctx) {
  return binary(ctx, Types::kBool);
}

template <>
InferResult infer_op(const ops::Xor&, const InferContext& ctx) {
  return binary(ctx, Types::kBool);
}

template <>
InferResult infer_op(const ops::Equal&, const InferContext& ctx) {
  return binary(ctx, Types::kAny, DType::kBool);
}

template <>
InferResult infer_op(const ops::Greater&, const InferContext& ctx) {
  return binary(ctx, Types::kNumeric, DType::kBool);
}

template <>
InferResult infer_op(const ops::GreaterOrEqual&, const InferContext& ctx) {
  return binary(ctx, Types::kNumeric, DType::kBool);
}

template <>
InferResult infer_op(const ops::Less&, const InferContext& ctx) {
  return binary(ctx, Types::kNumeric, DType::kBool);
}

template <>
InferResult infer_op(const ops::LessOrEqual&, const InferContext& ctx) {
  return binary(ctx, Types::kNumeric, DType::kBool);
}

template <>
InferResult infer_op(const ops::BitShift& op, const InferContext& ctx) {
  if (!op.direction) return ctx.error("attribute direction is required");
  if (*op.direction != "LEFT" && *op.direction != "RIGHT") {
    return ctx.errorf("attribute direction must be \"LEFT\" or \"RIGHT\", got \"{}\"",
                      *op.direction);
  }
  return binary(ctx, Types::kInteger);
}

template <>
InferResult infer_op(const ops::BitwiseAnd&, const InferContext& ctx) {
  return binary(ctx, Types::kInteger);
}

template <>
InferResult infer_op(const ops::BitwiseOr&, const InferContext& ctx) {
  return binary(ctx, Types::kInteger);
}

template <>
InferResult infer_op(const ops::BitwiseXor&, const InferContext& ctx) {
  return binary(ctx, Types::kInteger);
}

template <>
InferResult infer_op(const ops::BitwiseNot&, const InferContext& ctx) {
  return unary(ctx, Types::kInteger);
}

template <>
InferResult infer_op(const ops::Max&, const InferContext& ctx) {
  return variadic(ctx, Types::kNumeric);
}

template <>
InferResult infer_op(const ops::Min&, const InferContext& ctx) {
  return variadic(ctx, Types::kNumeric);
}

template <>
InferResult infer_op(const ops::Mean&, const InferContext& ctx) {
  return variadic(ctx, Types::kFloat);
}

template <>
InferResult infer_op(const ops::Sum&, const InferContext& ctx) {
  return variadic(ctx, Types::kNumeric);
}

template <>
InferResult infer_op(const ops::Where&, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(check_arity(ctx, 3, 3));
  KILN_RETURN_IF_ERROR(check_input(ctx, 0, Types::kBool));
  KILN_RETURN_IF_ERROR(check_input(ctx, 1, Types::kAny));
  KILN_RETURN_IF_ERROR(check_input(ctx, 2, Types::kAny));
  KILN_RETURN_IF_ERROR(check_same_dtype(ctx, 1, 2));
  KILN_ASSIGN_OR_RETURN(TensorType t, broadcast_inputs(ctx, 0, 3));
  t.dtype = ctx.input(1).dtype;
  return std::vector<ValueType>{t};
}

namespace {

// Cast's and CastLike's `saturate` (0 or 1) and `round_mode` (for float8e8m0).
Status check_cast_attributes(const InferContext& ctx, const std::optional<int64_t>& saturate,
                             const std::optional<std::string>& mode) {
  if (saturate && *saturate != 0 && *saturate != 1) {
    return ctx.errorf("attribute saturate must be 0 or 1, got {}", *saturate);
  }
  const std::string round_mode = mode.value_or("up");
  if (round_mode != "up" && round_mode != "down" && round_mode != "nearest") {
    return ctx.errorf("attribute round_mode must be up, down or nearest, got \"{}\"", round_mode);
  }
  return Status();
}

}  // namespace

template <>
InferResult infer_op(const ops::Cast& op, const InferContext& ctx) {
  if (!op.to) return ctx.error("attribute to is required");
  KILN_RETURN_IF_ERROR(check_cast_attributes(ctx, op.saturate, op.round_mode));
  return unary(ctx, Types::kAny, *op.to);
}

template <>
InferResult infer_op(const ops::CastLike& op, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(check_cast_attributes(ctx, op.saturate, op.round_mode));
  KILN_RETURN_IF_ERROR(check_arity(ctx, 2, 2));
  KILN_RETURN_IF_ERROR(check_input(ctx, 0, Types::kAny));
  KILN_RETURN_IF_ERROR(check_input(ctx, 1, Types::kAny));
  TensorType t = ctx.input(0);
  t.dtype = ctx.input(1).dtype;
  return std::vector<ValueType>{t};
}

template <>
InferResult infer_op(const ops::Identity&, const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(check_arity(ctx, 1, 1));
  if (!ctx.has_input(0)) return ctx.error("input 0 is required");
  return std::vector<ValueType>{ctx.input_type(0)};
}

template <>
InferResult infer_op(const ops::BitCast& op, const InferContext& ctx) {
  if (!op.to) return ctx.error("attribute to is required");
  KILN_RETURN_IF_ERROR(check_arity(ctx, 1, 1));
  KILN_RETURN_IF_ERROR(check_input(ctx, 0, Types::kAny));
  const DType from = ctx.input(0).dtype;
  if (from == DType::kString || *op.to == DType::kString) {
    return ctx.errorf("cannot reinterpret {} as {}: strings have no fixed bits", dtype_name(from),
                      dtype_name(*op.to));
  }
  if (dtype_bits(from) != dtype_bits(*op.to)) {
    return ctx.errorf(
        "cannot reinterpret {} ({} bits) as {} ({} bits): BitCast needs types of the same width; "
        "use Cast to convert values",
        dtype_name(from), dtype_bits(from), dtype_name(*op.to), dtype_bits(*op.to));
  }
  return unary(ctx, Types::kAny, *op.to);
}

}  // namespace kiln::compiler
