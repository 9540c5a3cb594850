// SPDX-License-Identifier: Apache-2.0
// Parameters, wire dtype names and the small helpers of the server's request types.
#include "server/core/types.h"

#include <fmt/format.h>

#include <cmath>

namespace kiln::server {

namespace {

std::string_view type_name(const ParameterValue& value) {
  switch (value.index()) {
    case 0: return "a bool";
    case 1: return "an integer";
    case 2: return "a number";
    default: return "a string";
  }
}

Status wrong_type(std::string_view key, std::string_view expected, const ParameterValue& value) {
  return invalid_argument_error(fmt::format("parameter \"{}\": expected {}, got {} ({})", key,
                                            expected, type_name(value),
                                            parameter_to_string(value)));
}

}  // namespace

void Parameters::erase(std::string_view key) {
  auto it = values_.find(key);
  if (it != values_.end()) values_.erase(it);
}

Result<std::optional<bool>> Parameters::get_bool(std::string_view key) const {
  auto it = values_.find(key);
  if (it == values_.end()) return std::optional<bool>();
  if (const bool* b = std::get_if<bool>(&it->second)) return std::optional<bool>(*b);
  if (const std::string* s = std::get_if<std::string>(&it->second)) {
    if (*s == "true" || *s == "1") return std::optional<bool>(true);
    if (*s == "false" || *s == "0") return std::optional<bool>(false);
  }
  if (const int64_t* i = std::get_if<int64_t>(&it->second)) {
    if (*i == 0 || *i == 1) return std::optional<bool>(*i == 1);
  }
  return wrong_type(key, "a bool", it->second);
}

Result<std::optional<int64_t>> Parameters::get_int(std::string_view key) const {
  auto it = values_.find(key);
  if (it == values_.end()) return std::optional<int64_t>();
  if (const int64_t* i = std::get_if<int64_t>(&it->second)) return std::optional<int64_t>(*i);
  if (const double* d = std::get_if<double>(&it->second)) {
    if (std::nearbyint(*d) == *d && std::fabs(*d) < 9.0e18) {
      return std::optional<int64_t>(static_cast<int64_t>(*d));
    }
  }
  if (const std::string* s = std::get_if<std::string>(&it->second)) {
    char* end = nullptr;
    long long v = std::strtoll(s->c_str(), &end, 10);
    if (!s->empty() && *end == '\0') return std::optional<int64_t>(v);
  }
  return wrong_type(key, "an integer", it->second);
}

Result<std::optional<double>> Parameters::get_double(std::string_view key) const {
  auto it = values_.find(key);
  if (it == values_.end()) return std::optional<double>();
  if (const double* d = std::get_if<double>(&it->second)) return std::optional<double>(*d);
  if (const int64_t* i = std::get_if<int64_t>(&it->second)) {
    return std::optional<double>(static_cast<double>(*i));
  }
  return wrong_type(key, "a number", it->second);
}

Result<std::optional<std::string>> Parameters::get_string(std::string_view key) const {
  auto it = values_.find(key);
  if (it == values_.end()) return std::optional<std::string>();
  if (const std::string* s = std::get_if<std::string>(&it->second)) {
    return std::optional<std::string>(*s);
  }
  return wrong_type(key, "a string", it->second);
}

void Parameters::merge(const Parameters& other) {
  for (const auto& [key, value] : other.values_) values_[key] = value;
}

std::string parameter_to_string(const ParameterValue& value) {
  switch (value.index()) {
    case 0: return std::get<bool>(value) ? "true" : "false";
    case 1: return std::to_string(std::get<int64_t>(value));
    case 2: return fmt::format("{}", std::get<double>(value));
    default: return std::get<std::string>(value);
  }
}

std::string_view wire_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "FP32";
    case DType::kF16: return "FP16";
    case DType::kBF16: return "BF16";
    case DType::kF64: return "FP64";
    case DType::kI8: return "INT8";
    case DType::kU8: return "UINT8";
    case DType::kI16: return "INT16";
    case DType::kU16: return "UINT16";
    case DType::kI32: return "INT32";
    case DType::kU32: return "UINT32";
    case DType::kI64: return "INT64";
    case DType::kU64: return "UINT64";
    case DType::kBool: return "BOOL";
    case DType::kString: return "BYTES";
    default: break;  // the narrow types (float8, int4, ...) have no KServe v2 name
  }
  return "UNKNOWN";
}

std::optional<DType> parse_wire_dtype(std::string_view name) {
  for (int i = 0; i < kNumDTypes; ++i) {
    DType d = static_cast<DType>(i);
    if (!dtype_is_narrow(d) && wire_dtype_name(d) == name) return d;
  }
  return std::nullopt;
}

std::string dims_to_string(const std::vector<int64_t>& dims) {
  return fmt::format("[{}]", fmt::join(dims, ","));
}

}  // namespace kiln::server
