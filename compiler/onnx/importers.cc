// SPDX-License-Identifier: Apache-2.0
// The whole ONNX version table, joined from each family's rows in one place.
#include "compiler/onnx/node_importer.h"

namespace kiln::compiler {

const std::vector<OpsetImporter>& all_importers() {
  static const std::vector<OpsetImporter> table = [] {
    std::vector<OpsetImporter> all;
    for (auto rows : {elementwise_importers, nn_importers, linalg_importers, reduce_importers,
                      shape_importers, indexing_importers, rnn_importers, control_importers,
                      quantize_importers, image_importers, signal_importers, random_importers,
                      misc_importers, ml_importers, attention_importers, contrib_importers}) {
      for (OpsetImporter& row : rows()) all.push_back(std::move(row));
    }
    return all;
  }();
  return table;
}

}  // namespace kiln::compiler
