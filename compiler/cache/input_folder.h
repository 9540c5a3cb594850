// SPDX-License-Identifier: Apache-2.0
// A folder of model inputs as .npy files (int8 calibration, verification), read for a graph, and
// its hash for compile cache keys (CompileRequest::data_hash): what `kiln compile --int8
// --calibration DIR` and the server's int8 models read.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "compiler/ir/graph.h"
#include "core/status.h"
#include "core/tensor.h"

namespace kiln::compiler {

// One batch of a folder: a tensor per graph input, and the file or sub-folder it came from.
struct FolderBatch {
  std::map<std::string, Tensor> tensors;
  std::string source;
};

// Reads `dir` for `graph`: .npy files (a one-input graph; each file is one batch), else
// sub-folders holding <input name>.npy each (one batch per sub-folder), in name order. Errors
// name the folder and what is missing; an empty result is not an error.
Result<std::vector<FolderBatch>> read_npy_folder(const std::filesystem::path& dir,
                                                 const Graph& graph);

// A hash of every regular file under `dir` (its path in the folder, size and bytes, in name
// order) and of the `extra` files after them; 0 when there is none or one cannot be read (the
// caller then caches nothing).
uint64_t hash_input_folder(const std::filesystem::path& dir,
                           const std::vector<std::filesystem::path>& extra = {});

}  // namespace kiln::compiler
