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
#include "core/float8.h"
#include "core/half.h"
#include "core/int4.h"

namespace kiln {

// Element types. kString holds std::string elements; every other type is trivially copyable. The
// values are stored in compiled artifacts: new types are appended, existing values never change.
// The narrow types after kString (ONNX's 8-, 4- and 2-bit types, in ONNX's order) take one byte
// per element, also the 4- and 2-bit ones; only conversions compute with them.
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
  kF8E4M3FN,
  kF8E4M3FNUZ,
  kF8E5M2,
  kF8E5M2FNUZ,
  kU4,
  kI4,
  kF4E2M1,
  kF8E8M0,
  kU2,
  kI2,
};

inline constexpr int kNumDTypes = 24;

// Bytes per element (sizeof(std::string) for kString).
size_t dtype_size(DType dtype);
// Bits of one element's value: 8 * dtype_size, but 4 for u4/i4/f4e2m1 and 2 for u2/i2 (which
// kiln stores one per byte). 0 for kString.
int dtype_bits(DType dtype);
// Short lower-case name: "f32", "bf16", "i64", "bool", "string", "f8e4m3fn", "i4".
std::string_view dtype_name(DType dtype);
// Accepts the short names and the common long ones ("float32", "float", "int64", "uint8",
// "float16", "bfloat16", "double", "float8e4m3fn", "int4"); nullopt for anything else.
std::optional<DType> parse_dtype(std::string_view name);

// The arithmetic types, which every numeric kernel handles. The narrow types are in none of these.
bool dtype_is_float(DType dtype);    // f16, bf16, f32, f64
bool dtype_is_integer(DType dtype);  // signed and unsigned integers (not bool)
bool dtype_is_signed(DType dtype);   // signed integers and floats
// ONNX's narrow types: f8e4m3fn, f8e4m3fnuz, f8e5m2, f8e5m2fnuz, f4e2m1, f8e8m0 (floats) and u4,
// i4, u2, i2 (integers). Kernels convert them (Cast, QuantizeLinear, DequantizeLinear), move them
// (Reshape, Transpose, Gather, ...) and reinterpret them (BitCast); arithmetic kernels refuse them.
bool dtype_is_narrow(DType dtype);
bool dtype_is_narrow_float(DType dtype);
bool dtype_is_narrow_integer(DType dtype);

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
KILN_DTYPE_TRAITS_(DType::kF8E4M3FN, Float8E4M3FN);
KILN_DTYPE_TRAITS_(DType::kF8E4M3FNUZ, Float8E4M3FNUZ);
KILN_DTYPE_TRAITS_(DType::kF8E5M2, Float8E5M2);
KILN_DTYPE_TRAITS_(DType::kF8E5M2FNUZ, Float8E5M2FNUZ);
KILN_DTYPE_TRAITS_(DType::kU4, UInt4);
KILN_DTYPE_TRAITS_(DType::kI4, Int4);
KILN_DTYPE_TRAITS_(DType::kF4E2M1, Float4E2M1);
KILN_DTYPE_TRAITS_(DType::kF8E8M0, Float8E8M0);
KILN_DTYPE_TRAITS_(DType::kU2, UInt2);
KILN_DTYPE_TRAITS_(DType::kI2, Int2);
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
KILN_DTYPE_OF_(DType::kF8E4M3FN, Float8E4M3FN)
KILN_DTYPE_OF_(DType::kF8E4M3FNUZ, Float8E4M3FNUZ)
KILN_DTYPE_OF_(DType::kF8E5M2, Float8E5M2)
KILN_DTYPE_OF_(DType::kF8E5M2FNUZ, Float8E5M2FNUZ)
KILN_DTYPE_OF_(DType::kU4, UInt4)
KILN_DTYPE_OF_(DType::kI4, Int4)
KILN_DTYPE_OF_(DType::kF4E2M1, Float4E2M1)
KILN_DTYPE_OF_(DType::kF8E8M0, Float8E8M0)
KILN_DTYPE_OF_(DType::kU2, UInt2)
KILN_DTYPE_OF_(DType::kI2, Int2)
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
    case DType::kF8E4M3FN: return fn.template operator()<Float8E4M3FN>();
    case DType::kF8E4M3FNUZ: return fn.template operator()<Float8E4M3FNUZ>();
    case DType::kF8E5M2: return fn.template operator()<Float8E5M2>();
    case DType::kF8E5M2FNUZ: return fn.template operator()<Float8E5M2FNUZ>();
    case DType::kU4: return fn.template operator()<UInt4>();
    case DType::kI4: return fn.template operator()<Int4>();
    case DType::kF4E2M1: return fn.template operator()<Float4E2M1>();
    case DType::kF8E8M0: return fn.template operator()<Float8E8M0>();
    case DType::kU2: return fn.template operator()<UInt2>();
    case DType::kI2: return fn.template operator()<Int2>();
  }
  KILN_CHECK(false, "invalid DType value");
  __builtin_unreachable();
}

}  // namespace kiln
