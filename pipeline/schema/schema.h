// SPDX-License-Identifier: Apache-2.0
// Operator schemas: names, inputs, outputs and typed arguments with defaults, docs and validation.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/status.h"

namespace kiln::pipeline {

enum class ArgType { kInt, kFloat, kBool, kString, kIntList, kFloatList };

// "int", "float", "bool", "string", "int list", "float list".
std::string_view arg_type_name(ArgType type);

using ArgValue =
    std::variant<int64_t, double, bool, std::string, std::vector<int64_t>, std::vector<double>>;

// The values a user passes to an operator, by argument name.
using ArgMap = std::map<std::string, ArgValue, std::less<>>;

struct ArgSpec {
  std::string name;
  ArgType type;
  std::optional<ArgValue> default_value;  // none: the argument is required
  std::string doc;                        // one line
  // A per-sample argument may instead be fed, sample by sample, from another operator's output
  // (e.g. random.uniform); the static value is then ignored.
  bool per_sample = false;
};

struct OperatorSchema {
  std::string name;  // "decoders.image"
  std::string doc;   // one line
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  std::vector<ArgSpec> args;

  const ArgSpec* find_arg(std::string_view arg_name) const;
};

// Validated argument values of one operator instance: every schema argument has a value of its
// declared type (the default where the user gave none). Getters abort on a name or type the
// schema does not declare: that is a bug in the operator, not bad user input.
class OpArgs {
 public:
  OpArgs() = default;
  OpArgs(const OperatorSchema* schema, ArgMap values)
      : schema_(schema), values_(std::move(values)) {}

  const OperatorSchema& schema() const { return *schema_; }
  int64_t get_int(std::string_view name) const;
  double get_float(std::string_view name) const;
  bool get_bool(std::string_view name) const;
  const std::string& get_string(std::string_view name) const;
  const std::vector<int64_t>& get_ints(std::string_view name) const;
  const std::vector<double>& get_floats(std::string_view name) const;

  // Replaces a per-sample argument's value (int or float); used by the executor per sample.
  void set_sample_value(std::string_view name, double value);

 private:
  const ArgValue& get(std::string_view name, ArgType type) const;

  const OperatorSchema* schema_ = nullptr;
  ArgMap values_;
};

// Checks `values` against `schema`: unknown names, missing required arguments and wrong types are
// errors that name the operator and argument. An int is accepted for a float and an int list for a
// float list; a single value is accepted for a list of its element type.
Result<OpArgs> validate_args(const OperatorSchema& schema, const ArgMap& values);

// "int 3", "float list [0.5,1]" etc.: for error messages and docs.
std::string arg_value_to_string(const ArgValue& value);

}  // namespace kiln::pipeline
