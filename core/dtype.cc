// SPDX-License-Identifier: Apache-2.0
// DType sizes, names and parsing; half-precision conversions.
#include "core/dtype.h"

#include <array>

namespace kiln {

namespace {
struct DTypeInfo {
  DType dtype;
  size_t size;
  std::string_view name;
  int bits;  // of the value
};
constexpr std::array<DTypeInfo, kNumDTypes> kInfo = {{
    {DType::kF32, 4, "f32", 32},
    {DType::kF16, 2, "f16", 16},
    {DType::kBF16, 2, "bf16", 16},
    {DType::kF64, 8, "f64", 64},
    {DType::kI8, 1, "i8", 8},
    {DType::kU8, 1, "u8", 8},
    {DType::kI16, 2, "i16", 16},
    {DType::kU16, 2, "u16", 16},
    {DType::kI32, 4, "i32", 32},
    {DType::kU32, 4, "u32", 32},
    {DType::kI64, 8, "i64", 64},
    {DType::kU64, 8, "u64", 64},
    {DType::kBool, 1, "bool", 8},
    {DType::kString, sizeof(std::string), "string", 0},
    {DType::kF8E4M3FN, 1, "f8e4m3fn", 8},
    {DType::kF8E4M3FNUZ, 1, "f8e4m3fnuz", 8},
    {DType::kF8E5M2, 1, "f8e5m2", 8},
    {DType::kF8E5M2FNUZ, 1, "f8e5m2fnuz", 8},
    {DType::kU4, 1, "u4", 4},
    {DType::kI4, 1, "i4", 4},
    {DType::kF4E2M1, 1, "f4e2m1", 4},
    {DType::kF8E8M0, 1, "f8e8m0", 8},
    {DType::kU2, 1, "u2", 2},
    {DType::kI2, 1, "i2", 2},
}};

const DTypeInfo& info(DType dtype) {
  auto index = static_cast<size_t>(dtype);
  KILN_CHECK(index < kInfo.size(), "invalid DType value");
  return kInfo[index];
}
}  // namespace

size_t dtype_size(DType dtype) { return info(dtype).size; }
int dtype_bits(DType dtype) {
  return info(dtype).bits;
}
std::string_view dtype_name(DType dtype) { return info(dtype).name; }

std::optional<DType> parse_dtype(std::string_view name) {
  for (const DTypeInfo& i : kInfo) {
    if (i.name == name) return i.dtype;
  }
  struct Alias {
    std::string_view name;
    DType dtype;
  };
  static constexpr Alias kAliases[] = {
      {"float32", DType::kF32},
      {"float", DType::kF32},
      {"float16", DType::kF16},
      {"half", DType::kF16},
      {"bfloat16", DType::kBF16},
      {"float64", DType::kF64},
      {"double", DType::kF64},
      {"int8", DType::kI8},
      {"uint8", DType::kU8},
      {"int16", DType::kI16},
      {"uint16", DType::kU16},
      {"int32", DType::kI32},
      {"uint32", DType::kU32},
      {"int64", DType::kI64},
      {"uint64", DType::kU64},
      {"str", DType::kString},
      {"float8e4m3fn", DType::kF8E4M3FN},
      {"float8e4m3fnuz", DType::kF8E4M3FNUZ},
      {"float8e5m2", DType::kF8E5M2},
      {"float8e5m2fnuz", DType::kF8E5M2FNUZ},
      {"uint4", DType::kU4},
      {"int4", DType::kI4},
      {"float4e2m1", DType::kF4E2M1},
      {"float8e8m0", DType::kF8E8M0},
      {"uint2", DType::kU2},
      {"int2", DType::kI2},
  };
  for (const Alias& a : kAliases) {
    if (a.name == name) return a.dtype;
  }
  return std::nullopt;
}

bool dtype_is_float(DType d) {
  return d == DType::kF32 || d == DType::kF16 || d == DType::kBF16 || d == DType::kF64;
}
bool dtype_is_integer(DType d) {
  switch (d) {
    case DType::kI8:
    case DType::kU8:
    case DType::kI16:
    case DType::kU16:
    case DType::kI32:
    case DType::kU32:
    case DType::kI64:
    case DType::kU64: return true;
    default: return false;
  }
}
bool dtype_is_signed(DType d) {
  return dtype_is_float(d) || d == DType::kI8 || d == DType::kI16 || d == DType::kI32 ||
         d == DType::kI64;
}
bool dtype_is_narrow(DType d) {
  return dtype_is_narrow_float(d) || dtype_is_narrow_integer(d);
}
bool dtype_is_narrow_float(DType d) {
  switch (d) {
    case DType::kF8E4M3FN:
    case DType::kF8E4M3FNUZ:
    case DType::kF8E5M2:
    case DType::kF8E5M2FNUZ:
    case DType::kF4E2M1:
    case DType::kF8E8M0: return true;
    default: return false;
  }
}
bool dtype_is_narrow_integer(DType d) {
  return d == DType::kU4 || d == DType::kI4 || d == DType::kU2 || d == DType::kI2;
}

namespace detail {

uint16_t float_to_half_bits(float f) {
  uint32_t x = float_bits(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (abs < 0x38800000u) {
    // Subnormal half (or zero): scale into the subnormal range with round-to-nearest-even.
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);  // < 2^-25 rounds to 0
    uint32_t exp = abs >> 23;
    uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - exp;  // 14 + (113 - exp) ... bits to drop from the 24-bit mantissa
    uint32_t half_mant = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half_mant & 1u))) ++half_mant;
    return static_cast<uint16_t>(sign | half_mant);
  }
  // Normal: rebias the exponent, round the mantissa to 10 bits (nearest even).
  uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
  return static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
}

float half_bits_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    if (mant == 0) return bits_float(sign);
    // Subnormal: value = mant * 2^-24.
    float v = static_cast<float>(mant) * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  if (exp == 31) return bits_float(sign | 0x7f800000u | (mant << 13));
  return bits_float(sign | ((exp + 112) << 23) | (mant << 13));
}

}  // namespace detail
}  // namespace kiln
