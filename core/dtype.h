// SPDX-License-Identifier: Apache-2.0
// DType: the element types kiln tensors hold, their sizes and names, and visit_dtype dispatch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "core/check.h"
#include "core/half.h"

namespace kiln {

// Element types. kString holds std::string elements; every other type is trivially copyable.
enum class DType : uint8_t {
  kF32,
  kF16,
  kBF16,
  kF64,
  kI8,
  kU8,
  kI16,
  kU16,
  kI32,
  kU32,
  kI64,
  kU64,
  kBool,
  kString,
};

inline constexpr int kNumDTypes = 14;

// Bytes per element (sizeof(std::string) for kString).
size_t dtype_size(DType dtype);
// Short lower-case name: "f32", "bf16", "i64", "bool", "string".
std::string_view dtype_name(DType dtype);
// Accepts the short names and the common long ones ("float32", "float", "int64", "uint8",
// "float16", "bfloat16", "double"); nullopt for anything else.
std::optional<DType> parse_dtype(std::string_view name);

bool dtype_is_float(DType dtype);    // f16, bf16, f32, f64
bool dtype_is_integer(DType dtype);  // signed and unsigned integers (not bool)
bool dtype_is_signed(DType dtype);   // signed integers and floats

// The C++ type of each element type.
template <DType D>
struct DTypeTraits;
#define KILN_DTYPE_TRAITS_(D, T) \
  template <>                    \
  struct DTypeTraits<D> {        \
    using type = T;              \
  }
KILN_DTYPE_TRAITS_(DType::kF32, float);
KILN_DTYPE_TRAITS_(DType::kF16, Half);
KILN_DTYPE_TRAITS_(DType::kBF16, BFloat16);
KILN_DTYPE_TRAITS_(DType::kF64, double);
KILN_DTYPE_TRAITS_(DType::kI8, int8_t);
KILN_DTYPE_TRAITS_(DType::kU8, uint8_t);
KILN_DTYPE_TRAITS_(DType::kI16, int16_t);
KILN_DTYPE_TRAITS_(DType::kU16, uint16_t);
KILN_DTYPE_TRAITS_(DType::kI32, int32_t);
KILN_DTYPE_TRAITS_(DType::kU32, uint32_t);
KILN_DTYPE_TRAITS_(DType::kI64, int64_t);
KILN_DTYPE_TRAITS_(DType::kU64, uint64_t);
KILN_DTYPE_TRAITS_(DType::kBool, bool);
KILN_DTYPE_TRAITS_(DType::kString, std::string);
#undef KILN_DTYPE_TRAITS_

template <DType D>
using dtype_type_t = typename DTypeTraits<D>::type;

// The DType of a C++ element type: dtype_of<float>() == DType::kF32.
template <class T>
constexpr DType dtype_of();
#define KILN_DTYPE_OF_(D, T)        \
  template <>                       \
  constexpr DType dtype_of<T>() {   \
    return D;                       \
  }
KILN_DTYPE_OF_(DType::kF32, float)
KILN_DTYPE_OF_(DType::kF16, Half)
KILN_DTYPE_OF_(DType::kBF16, BFloat16)
KILN_DTYPE_OF_(DType::kF64, double)
KILN_DTYPE_OF_(DType::kI8, int8_t)
KILN_DTYPE_OF_(DType::kU8, uint8_t)
KILN_DTYPE_OF_(DType::kI16, int16_t)
KILN_DTYPE_OF_(DType::kU16, uint16_t)
KILN_DTYPE_OF_(DType::kI32, int32_t)
KILN_DTYPE_OF_(DType::kU32, uint32_t)
KILN_DTYPE_OF_(DType::kI64, int64_t)
KILN_DTYPE_OF_(DType::kU64, uint64_t)
KILN_DTYPE_OF_(DType::kBool, bool)
KILN_DTYPE_OF_(DType::kString, std::string)
#undef KILN_DTYPE_OF_

// Calls `fn.template operator()<T>()` with T the element type of `dtype`:
//   visit_dtype(t.dtype(), [&]<class T>() { fill<T>(t); });
template <class F>
decltype(auto) visit_dtype(DType dtype, F&& fn) {
  switch (dtype) {
    case DType::kF32: return fn.template operator()<float>();
    case DType::kF16: return fn.template operator()<Half>();
    case DType::kBF16: return fn.template operator()<BFloat16>();
    case DType::kF64: return fn.template operator()<double>();
    case DType::kI8: return fn.template operator()<int8_t>();
    case DType::kU8: return fn.template operator()<uint8_t>();
    case DType::kI16: return fn.template operator()<int16_t>();
    case DType::kU16: return fn.template operator()<uint16_t>();
    case DType::kI32: return fn.template operator()<int32_t>();
    case DType::kU32: return fn.template operator()<uint32_t>();
    case DType::kI64: return fn.template operator()<int64_t>();
    case DType::kU64: return fn.template operator()<uint64_t>();
    case DType::kBool: return fn.template operator()<bool>();
    case DType::kString: return fn.template operator()<std::string>();
  }
  KILN_CHECK(false, "invalid DType value");
  __builtin_unreachable();
}

}  // namespace kiln
