// SPDX-License-Identifier: Apache-2.0
// kiln.shape: MIGraphX's type names and the tensor-type value the bindings share.
#include "python/src/shape.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <optional>

#include "python/src/bindings.h"

namespace kiln::python {

// In DType order (MIGraphX's names where it has the type).
const char* const kTypeNames[] = {
    "float_type",       "half_type",    "bf16_type",        "double_type", "int8_type",
    "uint8_type",       "int16_type",   "uint16_type",      "int32_type",  "uint32_type",
    "int64_type",       "uint64_type",  "bool_type",        "string_type", "fp8e4m3fn_type",
    "fp8e4m3fnuz_type", "fp8e5m2_type", "fp8e5m2fnuz_type", "uint4_type",  "int4_type",
    "fp4e2m1_type",     "fp8e8m0_type", "uint2_type",       "int2_type"};
static_assert(std::size(kTypeNames) == kNumDTypes);

DType dtype_from_name(const std::string& name) {
  for (int i = 0; i < kNumDTypes; ++i) {
    if (name == kTypeNames[i]) return static_cast<DType>(i);
  }
  if (std::optional<DType> d = parse_dtype(name)) return *d;
  raise_status(invalid_argument_error(fmt::format(
      "shape: unknown type \"{}\"; expected a MIGraphX name (float_type, int64_type, ...) or a "
      "numpy one (float32, int64, ...)",
      name)));
}

PyShape PyShape::of(const compiler::TensorType& type) {
  PyShape s;
  s.dtype = type.dtype;
  for (const compiler::Dim& d : type.dims.value_or(std::vector<compiler::Dim>{})) {
    s.lens.push_back(d.value);
    s.symbols.push_back(d.symbol);
  }
  return s;
}

bool PyShape::dynamic() const {
  return std::any_of(lens.begin(), lens.end(), [](int64_t d) { return d < 0; });
}

int64_t PyShape::elements() const {
  int64_t n = 1;
  for (int64_t d : lens) n *= d;
  return dynamic() ? -1 : n;
}

std::vector<int64_t> PyShape::strides() const {
  std::vector<int64_t> out(lens.size());
  int64_t stride = 1;
  for (size_t i = lens.size(); i-- > 0;) {
    out[i] = stride;
    stride *= std::max<int64_t>(lens[i], 1);
  }
  return out;
}

std::string PyShape::to_string() const {
  std::vector<std::string> dims;
  for (size_t i = 0; i < lens.size(); ++i) {
    dims.push_back(lens[i] >= 0         ? std::to_string(lens[i])
                   : symbols[i].empty() ? std::string("?")
                                        : symbols[i]);
  }
  return fmt::format("{}, {{{}}}, {{{}}}", kTypeNames[static_cast<int>(dtype)],
                     fmt::join(dims, ", "), fmt::join(strides(), ", "));
}

}  // namespace kiln::python
