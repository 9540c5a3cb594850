// SPDX-License-Identifier: Apache-2.0
// `kiln run --pipeline P.json --input NAME=FILE.png`: image files turned into a model input by a
// data pipeline (the one a server's pipeline model or chain would run on them).
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace kiln::tools {

// Whether `path` names an image a pipeline decodes (.png, .jpg, .jpeg, any case), not a .npy.
bool is_image_file(const std::string& path);

// Runs the encoded images `paths` through the pipeline `pipeline_json` (its reader, whatever it
// is, becomes readers.external_source: the files are fed to it, as a server feeds requests) and
// stacks the pipeline's first output into one [n, ...] tensor, n = paths.size(). Fails with the
// file and the reason when a file cannot be read or decoded, or when the pipeline gives samples of
// different shapes.
Result<Tensor> images_through_pipeline(const std::vector<std::string>& paths,
                                       const std::string& pipeline_json);

}  // namespace kiln::tools
