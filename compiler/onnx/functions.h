// SPDX-License-Identifier: Apache-2.0
// Model-local functions (ModelProto.functions, IR version 8+): every call of one is replaced by
// its body before import, as ONNX Runtime does, so the importer sees only ops it knows.
#pragma once

#include <string>

#include "core/status.h"

namespace onnx {
class ModelProto;
}  // namespace onnx

namespace kiln::compiler {

// Inlines the calls of `model`'s local functions in its graph and every subgraph, nested calls
// included, and adds the domains their bodies import to the model's. Each inlined value is named
// "<call>/<name in the body>"; an attribute reference (ref_attr_name) takes the call's attribute,
// else the function's default, else the attribute is left out. `name` names the model in errors
// (a call with more inputs or outputs than the function declares, a function that calls itself).
Status inline_local_functions(onnx::ModelProto& model, const std::string& name);

}  // namespace kiln::compiler
