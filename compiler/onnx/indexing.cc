// SPDX-License-Identifier: Apache-2.0
// ONNX import rows for the indexing op family: versions whose semantics differ from kiln's op.
#include "compiler/onnx/node_importer.h"
#include "compiler/ops/indexing.h"

namespace kiln::compiler {

std::vector<OpsetImporter> indexing_importers() { return {}; }

}  // namespace kiln::compiler
