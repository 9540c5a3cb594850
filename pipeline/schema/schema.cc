// SPDX-License-Identifier: Apache-2.0
// Operator schemas: argument lookup, typed getters and validation.
#include "pipeline/schema/schema.h"

#include <fmt/format.h>

#include <cmath>

namespace kiln::pipeline {
namespace {

// The type a stored value has; int lists and float lists are told apart by the variant index.
ArgType type_of(const ArgValue& value) {
  switch (value.index()) {
    case 0: return ArgType::kInt;
    case 1: return ArgType::kFloat;
    case 2: return ArgType::kBool;
    case 3: return ArgType::kString;
    case 4: return ArgType::kIntList;
    default: return ArgType::kFloatList;
  }
}

// Converts `value` to `type` where the conversion loses nothing the user meant, else nullopt.
std::optional<ArgValue> convert(const ArgValue& value, ArgType type) {
  ArgType from = type_of(value);
  if (from == type) return value;
  if (type == ArgType::kFloat && from == ArgType::kInt) {
    return static_cast<double>(std::get<int64_t>(value));
  }
  if (type == ArgType::kInt && from == ArgType::kFloat) {
    double d = std::get<double>(value);
    if (std::floor(d) == d && std::abs(d) < 9.0e15) return static_cast<int64_t>(d);
    return std::nullopt;
  }
  if (type == ArgType::kInt && from == ArgType::kBool) {
    return static_cast<int64_t>(std::get<bool>(value));
  }
  if (type == ArgType::kBool && from == ArgType::kInt) {
    int64_t i = std::get<int64_t>(value);
    if (i == 0 || i == 1) return i == 1;
    return std::nullopt;
  }
  if (type == ArgType::kFloatList && from == ArgType::kIntList) {
    const auto& ints = std::get<std::vector<int64_t>>(value);
    return std::vector<double>(ints.begin(), ints.end());
  }
  if (type == ArgType::kFloatList && (from == ArgType::kFloat || from == ArgType::kInt)) {
    auto scalar = convert(value, ArgType::kFloat);
    return std::vector<double>{std::get<double>(*scalar)};
  }
  if (type == ArgType::kIntList && from == ArgType::kInt) {
    return std::vector<int64_t>{std::get<int64_t>(value)};
  }
  return std::nullopt;
}

}  // namespace

std::string_view arg_type_name(ArgType type) {
  switch (type) {
    case ArgType::kInt: return "int";
    case ArgType::kFloat: return "float";
    case ArgType::kBool: return "bool";
    case ArgType::kString: return "string";
    case ArgType::kIntList: return "int list";
    case ArgType::kFloatList: return "float list";
  }
  return "unknown";
}

std::string arg_value_to_string(const ArgValue& value) {
  std::string type(arg_type_name(type_of(value)));
  switch (type_of(value)) {
    case ArgType::kInt: return fmt::format("{} {}", type, std::get<int64_t>(value));
    case ArgType::kFloat: return fmt::format("{} {}", type, std::get<double>(value));
    case ArgType::kBool: return fmt::format("{} {}", type, std::get<bool>(value));
    case ArgType::kString: return fmt::format("{} \"{}\"", type, std::get<std::string>(value));
    case ArgType::kIntList:
      return fmt::format("{} [{}]", type, fmt::join(std::get<std::vector<int64_t>>(value), ","));
    case ArgType::kFloatList:
      return fmt::format("{} [{}]", type, fmt::join(std::get<std::vector<double>>(value), ","));
  }
  return type;
}

const ArgSpec* OperatorSchema::find_arg(std::string_view arg_name) const {
  for (const ArgSpec& arg : args) {
    if (arg.name == arg_name) return &arg;
  }
  return nullptr;
}

const ArgValue& OpArgs::get(std::string_view name, ArgType type) const {
  KILN_CHECK(schema_ != nullptr, "OpArgs used before validation");
  const ArgSpec* spec = schema_->find_arg(name);
  KILN_CHECK(spec != nullptr && spec->type == type,
             fmt::format("operator {}: no {} argument \"{}\" in the schema", schema_->name,
                         arg_type_name(type), name));
  auto it = values_.find(name);
  KILN_CHECK(it != values_.end(), "validated arguments lack a value");
  return it->second;
}

int64_t OpArgs::get_int(std::string_view name) const {
  return std::get<int64_t>(get(name, ArgType::kInt));
}
double OpArgs::get_float(std::string_view name) const {
  return std::get<double>(get(name, ArgType::kFloat));
}
bool OpArgs::get_bool(std::string_view name) const {
  return std::get<bool>(get(name, ArgType::kBool));
}
const std::string& OpArgs::get_string(std::string_view name) const {
  return std::get<std::string>(get(name, ArgType::kString));
}
const std::vector<int64_t>& OpArgs::get_ints(std::string_view name) const {
  return std::get<std::vector<int64_t>>(get(name, ArgType::kIntList));
}
const std::vector<double>& OpArgs::get_floats(std::string_view name) const {
  return std::get<std::vector<double>>(get(name, ArgType::kFloatList));
}

void OpArgs::set_sample_value(std::string_view name, double value) {
  const ArgSpec* spec = schema_->find_arg(name);
  KILN_CHECK(spec != nullptr && spec->per_sample, "set_sample_value on a non per-sample argument");
  auto it = values_.find(name);
  KILN_CHECK(it != values_.end(), "validated arguments lack a value");
  switch (spec->type) {
    case ArgType::kInt: it->second = static_cast<int64_t>(std::llround(value)); break;
    case ArgType::kBool: it->second = value != 0.0; break;
    case ArgType::kFloat: it->second = value; break;
    default: KILN_CHECK(false, "per-sample arguments must be int, bool or float");
  }
}

Result<OpArgs> validate_args(const OperatorSchema& schema, const ArgMap& values) {
  for (const auto& [name, value] : values) {
    if (schema.find_arg(name) == nullptr) {
      std::vector<std::string_view> known;
      for (const ArgSpec& arg : schema.args) known.push_back(arg.name);
      return invalid_argument_error(fmt::format("operator {}: unknown argument \"{}\" (known: {})",
                                                schema.name, name, fmt::join(known, ", ")));
    }
  }
  ArgMap out;
  for (const ArgSpec& arg : schema.args) {
    auto it = values.find(arg.name);
    if (it == values.end()) {
      if (!arg.default_value) {
        return invalid_argument_error(
            fmt::format("operator {}: missing required argument \"{}\"", schema.name, arg.name));
      }
      out.emplace(arg.name, *arg.default_value);
      continue;
    }
    std::optional<ArgValue> converted = convert(it->second, arg.type);
    if (!converted) {
      return invalid_argument_error(fmt::format("operator {}: argument \"{}\" expects {}, got {}",
                                                schema.name, arg.name, arg_type_name(arg.type),
                                                arg_value_to_string(it->second)));
    }
    out.emplace(arg.name, std::move(*converted));
  }
  return OpArgs(&schema, std::move(out));
}

}  // namespace kiln::pipeline
