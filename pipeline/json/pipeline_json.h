// SPDX-License-Identifier: Apache-2.0
// Pipelines described in JSON: rocAL's six-operation format and kiln's own operator-list form.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "pipeline/executor/pipeline.h"

namespace kiln::pipeline {

// A parsed pipeline: executor options plus the operator list, ready for Pipeline::create().
struct PipelineSpec {
  PipelineOptions options;
  std::vector<OpSpec> ops;
  // "kiln" or "rocal": which of the two forms the text used.
  std::string format;
};

// Parses a pipeline. Two forms are accepted:
//
// rocAL (amdinfer's model file): {"pipeline": [{"operation": "Resize", "dest_width": 224, ...}]}
//   with the operations Resize, ResizeMirrorNormalize, CropResizeFixed, CropMirrorNormalize,
//   CropFixed and ResizeCropMirrorFixed and their keys. The chain is linear; a readers.file and
//   a decoders.image (RGB) come first. The outputs are the entries with "is_output": true (the
//   last entry when none is marked), then "label".
//
// kiln: {"batch_size": 32, "num_threads": 2, "prefetch_queue_depth": 2, "seed": 1,
//        "outputs": ["images", "label"],
//        "operators": [{"op": "readers.file", "args": {...}},
//                      {"op": "decoders.image_random_crop", "args": {...}},
//                      {"op": "random.coin_flip", "outputs": ["coin"]},
//                      {"op": "crop_mirror_normalize", "arg_inputs": {"mirror": "coin"}, ...}]}
//   Every operator's "args" are checked against its schema. "inputs" default to the latest
//   tensors named like the schema's inputs; "outputs" default to the schema's output names. A name
//   refers to the latest tensor given that name, so a linear chain needs no names at all.
//   "outputs" of the pipeline default to ["images", "label"].
//
// Errors name the entry ("pipeline entry #2 (Resize)") and the key, and say what was expected.
// `source` names the text in messages (a file path).
Result<PipelineSpec> parse_pipeline_json(std::string_view text, std::string_view source);

// Reads and parses a pipeline file; errors name the file.
Result<PipelineSpec> load_pipeline_json(const std::string& path);

}  // namespace kiln::pipeline
