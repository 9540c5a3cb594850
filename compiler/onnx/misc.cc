// SPDX-License-Identifier: Apache-2.0
// ONNX import rows for the misc op family: versions whose semantics differ from kiln's op.
#include "compiler/ops/misc.h"

#include "compiler/onnx/misc_gradient.h"
#include "compiler/onnx/node_importer.h"

namespace kiln::compiler {

std::vector<OpsetImporter> misc_importers() {
  return {
      {"ai.onnx.preview.training", "Gradient", 1, 1, import_gradient},
  };
}

}  // namespace kiln::compiler
