// SPDX-License-Identifier: Apache-2.0
// ONNX import: a ModelProto (file or bytes) into kiln's IR, with types inferred.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "compiler/ir/model.h"
#include "core/status.h"

namespace kiln::compiler {

struct ImportOptions {
  // Fixed shapes for named inputs; they replace the model's declared (possibly dynamic) dims.
  std::map<std::string, std::vector<int64_t>> input_shapes;
  // When >= 0, every unknown or symbolic input dim not given in input_shapes becomes this value.
  int64_t default_dim_value = -1;
  // Folder that external-data file names are relative to; defaults to the model file's folder.
  std::string external_data_dir;
};

// Imports an .onnx file. Errors name the file and, for node problems, the node and op:
//   `model.onnx: node Conv "conv1": input "w" is not defined`.
// A truncated or corrupt file, an unknown op or attribute, or a bad type is an error, never a crash.
Result<std::unique_ptr<Model>> import_onnx_file(const std::string& path,
                                                const ImportOptions& options = {});
// Imports a serialized ModelProto; `name` appears in messages.
Result<std::unique_ptr<Model>> import_onnx_bytes(std::span<const uint8_t> bytes,
                                                 const ImportOptions& options = {},
                                                 const std::string& name = "<memory>");

// One row of `kiln ops`: an ONNX op kiln imports and the opset versions it accepts.
struct SupportedOnnxOp {
  std::string domain;  // "" for the default domain
  std::string op_type;
  int64_t first_version;
  int64_t last_version;
};
std::vector<SupportedOnnxOp> supported_onnx_ops();

}  // namespace kiln::compiler
