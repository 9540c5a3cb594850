// SPDX-License-Identifier: Apache-2.0
// ref kernels for the elementwise op family's type conversions (Cast, CastLike, BitCast) and
// Identity.
#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "compiler/ops/elementwise.h"
#include "compiler/targets/ref/elementwise_util.h"
#include "compiler/targets/ref/kernel.h"

namespace kiln::compiler::ref {

namespace {

// A number as text: the shortest form that reads back to the same value (numpy's str()).
template <class From>
std::string to_text(const From& v) {
  if constexpr (std::is_same_v<From, bool>) {
    return v ? "True" : "False";
  } else if constexpr (kIsHalfLike<From>) {
    return fmt::format("{}", static_cast<float>(v));
  } else {
    return fmt::format("{}", v);
  }
}

// Text as a number: integers read exactly when they are written as integers; anything else goes
// through strtod (which reads "NaN", "INF", "+INF", "-INF"). Unreadable text is 0.
template <class To>
To from_text(const std::string& s) {
  if constexpr (std::is_same_v<To, bool>) {
    if (s == "True" || s == "true") return true;
    if (s == "False" || s == "false") return false;
  }
  if constexpr (kIsInt<To>) {
    char* end = nullptr;
    errno = 0;
    if constexpr (std::is_signed_v<To>) {
      long long v = std::strtoll(s.c_str(), &end, 10);
      if (end != s.c_str() && *end == '\0' && errno == 0 &&
          v >= std::numeric_limits<To>::lowest() && v <= std::numeric_limits<To>::max()) {
        return static_cast<To>(v);
      }
    } else {
      unsigned long long v = std::strtoull(s.c_str(), &end, 10);
      if (end != s.c_str() && *end == '\0' && errno == 0 && s.find('-') == std::string::npos &&
          v <= std::numeric_limits<To>::max()) {
        return static_cast<To>(v);
      }
    }
  }
  return from_double<To>(std::strtod(s.c_str(), nullptr));
}

// Cast's options for the narrow float types.
struct CastOptions {
  bool saturate = true;                         // float8: out of range to the largest value
  E8M0Rounding round_mode = E8M0Rounding::kUp;  // float8e8m0
};

Result<CastOptions> cast_options(const KernelContext& ctx, const std::optional<int64_t>& saturate,
                                 const std::optional<std::string>& mode) {
  CastOptions o;
  o.saturate = saturate.value_or(1) != 0;
  const std::string round_mode = mode.value_or("up");
  if (round_mode == "up") {
    o.round_mode = E8M0Rounding::kUp;
  } else if (round_mode == "down") {
    o.round_mode = E8M0Rounding::kDown;
  } else if (round_mode == "nearest") {
    o.round_mode = E8M0Rounding::kNearest;
  } else {
    return ctx.errorf("round_mode must be up, down or nearest, got \"{}\"", round_mode);
  }
  return o;
}

// A narrow element as the wide type it converts through exactly: double for the narrow floats,
// int64 for the 4- and 2-bit integers.
template <class T>
auto widen(const T& v) {
  if constexpr (kIsNarrowFloat<T>) {
    return to_double(v);
  } else {
    return static_cast<int64_t>(v.value());
  }
}

// One element converted as ONNX Cast does: floats to integers truncate toward zero (saturating,
// NaN to 0, where C is undefined), integers wrap, floats round to nearest even. To the 4- and
// 2-bit integers every number truncates and then wraps; to the narrow floats it rounds once to
// nearest even and saturates as `o` says (float8e8m0 rounds as its round_mode says). The narrow
// types convert from their exact double or int64 value.
template <class To, class From>
To convert(const From& v, const CastOptions& o) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (kIsNarrow<From>) {
    return convert<To>(widen(v), o);
  } else if constexpr (std::is_same_v<To, std::string>) {
    return to_text(v);
  } else if constexpr (std::is_same_v<From, std::string>) {
    if constexpr (kIsNarrow<To>) {
      return convert<To>(std::strtod(v.c_str(), nullptr), o);
    } else {
      return from_text<To>(v);
    }
  } else if constexpr (std::is_same_v<To, Float8E8M0>) {
    return To::from_bits(kiln::detail::float8e8m0_from_float(static_cast<float>(to_double(v)),
                                                             o.saturate, o.round_mode));
  } else if constexpr (kIsNarrowFloat<To>) {
    return To::from_double(to_double(v), o.saturate);
  } else if constexpr (kIsSmallInt<To>) {
    if constexpr (kIsFloat<From>) return To::wrap(saturate_to_int<int64_t>(to_double(v)));
    return To::wrap(static_cast<int64_t>(v));
  } else if constexpr (kIsFloat<From>) {
    if constexpr (std::is_same_v<From, double>) return from_double<To>(v);
    // float and the 16-bit floats are exact in double, so one rounding happens.
    return from_double<To>(to_double(v));
  } else if constexpr (std::is_same_v<To, bool>) {
    return v != 0;
  } else if constexpr (kIsInt<To>) {
    return static_cast<To>(v);  // integer to integer: modular, like C and numpy
  } else if constexpr (kIsHalfLike<To>) {
    return from_double<To>(static_cast<double>(v));
  } else {
    return static_cast<To>(v);  // integer to float or double: rounds to nearest
  }
}

Status cast_tensor(const Tensor& in, Tensor& out, const CastOptions& options) {
  visit_dtype(in.dtype(), [&]<class From>() {
    visit_dtype(out.dtype(), [&]<class To>() {
      const From* src = in.data<From>();
      To* dst = out.data<To>();
      for (int64_t i = 0; i < in.numel(); ++i) dst[i] = convert<To>(src[i], options);
    });
  });
  return Status();
}

}  // namespace

template <>
Status run_op(const ops::Cast& op, KernelContext& ctx) {
  KILN_ASSIGN_OR_RETURN(CastOptions options, cast_options(ctx, op.saturate, op.round_mode));
  return cast_tensor(ctx.input(0), ctx.output(0), options);
}

template <>
Status run_op(const ops::CastLike& op, KernelContext& ctx) {
  KILN_ASSIGN_OR_RETURN(CastOptions options, cast_options(ctx, op.saturate, op.round_mode));
  return cast_tensor(ctx.input(0), ctx.output(0), options);
}

// The bytes as they are (the same width by inference); bool keeps 0/1 and the 4- and 2-bit types
// their low bits, as kiln stores them.
template <>
Status run_op(const ops::BitCast&, KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  if (x.nbytes() != y.nbytes()) {
    return ctx.errorf("cannot reinterpret {} bytes of {} as {} bytes of {}", x.nbytes(),
                      dtype_name(x.dtype()), y.nbytes(), dtype_name(y.dtype()));
  }
  if (x.nbytes() > 0) std::memcpy(y.raw_data(), x.raw_data(), x.nbytes());
  auto* bytes = static_cast<uint8_t*>(y.raw_data());
  const int bits = dtype_bits(y.dtype());
  if (y.dtype() == DType::kBool || bits < 8) {
    const auto mask = static_cast<uint8_t>(bits < 8 ? (1u << bits) - 1 : 0xffu);
    for (size_t i = 0; i < y.nbytes(); ++i) {
      bytes[i] = y.dtype() == DType::kBool ? bytes[i] != 0 : static_cast<uint8_t>(bytes[i] & mask);
    }
  }
  return Status();
}

template <>
Status run_op(const ops::Identity&, KernelContext& ctx) {
  ctx.set_output(0, ctx.input_arg(0));
  return Status();
}

}  // namespace kiln::compiler::ref
