// SPDX-License-Identifier: Apache-2.0
// kiln.shape (MIGraphX's `shape`): a tensor type as the compiler bindings and the graph builder
// hand it to Python.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/ir/types.h"
#include "core/dtype.h"

namespace kiln::python {

// MIGraphX's shape::type_t names ("float_type", ...), indexed by DType.
extern const char* const kTypeNames[kNumDTypes];

// The DType of a MIGraphX type name or a numpy one ("float_type", "float32"); raises KilnError
// naming `name` otherwise.
DType dtype_from_name(const std::string& name);

// A tensor type as MIGraphX's `shape`: a type and lens; an unknown dim is -1 (dynamic()).
struct PyShape {
  DType dtype = DType::kF32;
  std::vector<int64_t> lens;
  std::vector<std::string> symbols;  // per dim; non-empty for a named dynamic dim

  static PyShape of(const compiler::TensorType& type);
  bool dynamic() const;
  int64_t elements() const;
  std::vector<int64_t> strides() const;
  std::string to_string() const;
};

}  // namespace kiln::python
