// SPDX-License-Identifier: Apache-2.0
// What `kiln run`, `kiln verify` and `kiln compile` share: parsing --input/--input-shape, loading
// the model, making inputs (from .npy files or seeded random data) and writing outputs.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "compiler/artifact/artifact.h"
#include "compiler/ir/argument.h"
#include "compiler/ir/model.h"
#include "compiler/onnx/importer.h"
#include "core/status.h"
#include "core/tensor.h"

namespace kiln::tools {

struct ModelInputOptions {
  std::vector<std::string> inputs;        // NAME=FILE.npy
  std::map<std::string, Tensor> tensors;  // inputs already made (images through --pipeline)
  std::vector<std::string> input_shapes;  // NAME=1x3x224x224
  uint64_t seed = 0;
  // When > 0, every dynamic input dim not set by input_shapes gets this size (`--batch`).
  int64_t batch = 0;
};

// A model with its inputs ready to run: an imported ONNX model, or a loaded artifact.
struct PreparedModel {
  std::unique_ptr<compiler::Model> model;  // set for an .onnx model
  compiler::ImportOptions import;          // what it was imported with (shapes, --batch)
  // Set for a .kiln artifact: already finalized for its target (`artifact.target`).
  std::shared_ptr<compiler::Executable> executable;
  compiler::ArtifactHeader artifact;
  double load_ms = 0;                      // how long loading the artifact took
  std::vector<compiler::Argument> inputs;  // one per graph input, in order
};

// Loads `path` — a .kiln artifact (recognised by its magic bytes) or an ONNX model imported with
// the given shapes (and the shapes of the given .npy inputs and tensors) — then builds every
// input: from its .npy file or tensor when given (checked against the model's dtype and shape),
// else random with `seed`.
// Errors name the input and say what to pass instead.
Result<PreparedModel> prepare_model(const std::string& path, const ModelInputOptions& options);

// Parses --input-shape values (NAME=1x3x224x224 or NAME=1,3,224,224) into a map by input name.
Result<std::map<std::string, std::vector<int64_t>>> parse_input_shapes(
    const std::vector<std::string>& values);

// "out:0" -> "out_0": characters outside [A-Za-z0-9._-] become '_'.
std::string sanitize_file_name(const std::string& name);

// Names longer than this, or with characters a file name should not hold, get a hashed file name.
inline constexpr size_t kMaxPlainFileName = 100;

// The file an output named `name` is written to: "<name>.npy" when the name is a safe file name
// of at most kMaxPlainFileName characters, else the sanitized name cut to that length, '-', and 8
// hex digits of a hash (FNV-1a) of the whole name ("Identity:0" -> "Identity_0-bff31fdc.npy"), so
// names of any length (tf2onnx writes 300-character ones) or characters give distinct, valid file
// names.
std::string output_file_name(const std::string& name);

// Writes each output as DIR/output_file_name(name) and DIR/outputs.json listing name (the real
// tensor name), file, dtype and shape in output order. Creates DIR when missing.
Status write_outputs(const std::string& dir, const std::vector<std::string>& names,
                     const std::vector<compiler::Argument>& outputs);

// `s` as the inside of a JSON string (quotes, backslashes and control characters escaped).
std::string json_escape(std::string_view s);

// A short human-readable summary of a tensor: dtype, shape and the first few values.
std::string summarize(const compiler::Argument& value);

}  // namespace kiln::tools
