// SPDX-License-Identifier: Apache-2.0
// The compiler backend (alias `migraphx`): serves an ONNX model compiled for the ref or cpu target.
#pragma once

#include <memory>

#include "server/backends/backend.h"

namespace kiln::server {

// Load-time parameters (config.toml [parameters] or a workerLoad body):
//   model      the .onnx file, relative to the version folder (default: the one .onnx there)
//   target     "cpu" (default) or "ref"
//   batch      the batch size compiled when the model's first dim is dynamic (default: the
//              model's max_batch_size, else 1); amdinfer's `batch_size` is accepted too
//   pad_batch  true (default): partial batches are padded to `batch` with copies of the first
//              request's rows; false: each batch size is compiled on first use and cached
std::unique_ptr<Backend> make_compiler_backend();

}  // namespace kiln::server
