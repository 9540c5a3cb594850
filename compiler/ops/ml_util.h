// SPDX-License-Identifier: Apache-2.0
// The ml family's attributes in one form, shared by inference and kernels.
#pragma once

#include "compiler/ops/ml.h"
#include "core/status.h"

namespace kiln::compiler {

// A LabelEncoder's mapping: keys and values as 1-D tensors of one length, and the one-element
// default of the values' type.
struct LabelTable {
  Tensor keys;
  Tensor values;
  Tensor fallback;
};

// Fails (invalid argument, message without the node) when no or several keys_* (values_*)
// attributes are given, their lengths differ, or the default does not match the values' type.
Result<LabelTable> label_table(const ops::LabelEncoder& op);

}  // namespace kiln::compiler
