// SPDX-License-Identifier: Apache-2.0
// Import of ai.onnx.preview.training Gradient: reverse-mode differentiation at import time.
#pragma once

#include "compiler/onnx/node_importer.h"

namespace kiln::compiler {

// Replaces a Gradient node by the backward graph of the nodes between its `xs` and `y`, built
// from ordinary ops (Add, Mul, ReduceSum, ...). Supports Add, Sub, Mul, Div, Neg, Identity and
// 2-D MatMul on the path; any other op there is an unimplemented error naming it.
Status import_gradient(NodeImporter& ni);

}  // namespace kiln::compiler
