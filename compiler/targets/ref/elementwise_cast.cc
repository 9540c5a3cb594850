// SPDX-License-Identifier: Apache-2.0
// ref kernels for the elementwise op family's type conversions (Cast, CastLike) and Identity.
#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
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

// One element converted as ONNX Cast does: floats to integers truncate toward zero (saturating,
// NaN to 0, where C is undefined), integers wrap, floats round to nearest even.
template <class To, class From>
To convert(const From& v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<To, std::string>) {
    return to_text(v);
  } else if constexpr (std::is_same_v<From, std::string>) {
    return from_text<To>(v);
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

Status cast_tensor(const Tensor& in, Tensor& out) {
  visit_dtype(in.dtype(), [&]<class From>() {
    visit_dtype(out.dtype(), [&]<class To>() {
      const From* src = in.data<From>();
      To* dst = out.data<To>();
      for (int64_t i = 0; i < in.numel(); ++i) dst[i] = convert<To>(src[i]);
    });
  });
  return Status();
}

}  // namespace

template <>
Status run_op(const ops::Cast&, KernelContext& ctx) {
  return cast_tensor(ctx.input(0), ctx.output(0));
}

template <>
Status run_op(const ops::CastLike&, KernelContext& ctx) {
  return cast_tensor(ctx.input(0), ctx.output(0));
}

template <>
Status run_op(const ops::Identity&, KernelContext& ctx) {
  ctx.set_output(0, ctx.input_arg(0));
  return Status();
}

}  // namespace kiln::compiler::ref
