// SPDX-License-Identifier: Apache-2.0
// What `kiln compile`, `run`, `perf` and `verify` share for quantization: the --fp16/--bf16/--int8
// flags, reading a folder of inputs (.npy files, or images through a pipeline JSON) for
// calibration and verification, and applying the chosen quantization to an imported graph.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "compiler/quantize/quantize.h"

namespace kiln::tools {

struct QuantizeFlags {
  bool fp16 = false;
  bool bf16 = false;
  bool int8 = false;
  std::vector<std::string> ops;  // --quantize-ops
  std::string calibration;       // --calibration DIR
  std::string pipeline;          // --calibration-pipeline P.json
  std::string method = "max";    // --calibration-method
  double percentile = 99.99;
  std::vector<std::string> exclude;  // --int8-exclude: node names or op names kept in float

  bool any() const { return fp16 || bf16 || int8; }
  // "fp16", "bf16", "int8 (entropy)" or "fp32".
  std::string describe() const;
  // The flags as given, for an artifact's recompile command and options.
  std::vector<std::pair<std::string, std::string>> as_options() const;
  // With int8, a hash of the calibration data: every file under the --calibration folder (its
  // path in the folder, size and bytes, in name order) and the --calibration-pipeline file; 0
  // without int8 or when a file cannot be read (then nothing is cached).
  uint64_t data_hash() const;
};

// Adds --fp16 and --bf16, and with `with_int8` --int8 and its calibration flags, plus
// --quantize-ops to `cmd`.
void add_quantize_flags(CLI::App* cmd, QuantizeFlags* flags, bool with_int8);

// One batch of a folder of inputs: a tensor per graph input, where it came from, and its labels
// when known (one per row of the first input).
struct InputBatch {
  compiler::CalibrationBatch tensors;
  std::string source;
  std::vector<int64_t> labels;
};

// Reads `dir` for a graph with the given inputs. Without `pipeline_json`: `dir` holds .npy files
// (a one-input graph: each file is one batch) or sub-folders holding <input name>.npy each (one
// batch per sub-folder), in name order. With it: the pipeline runs one epoch over `dir` (its
// readers.file's file_root), its first output feeds the graph's one input and an integer output
// named "labels" or "label", when there is one, gives the labels.
Result<std::vector<InputBatch>> load_input_folder(const std::string& dir,
                                                  const std::string& pipeline_json,
                                                  const compiler::Graph& graph);

// Reads labels for `batches` from a text file of "FILE LABEL [LABEL ...]" lines ('#' starts a
// comment); FILE matches a batch's source by name without extension.
Status attach_labels(const std::string& labels_file, std::vector<InputBatch>& batches);

// Applies the flags to `graph`: quantize_fp16/bf16, or quantize_int8 calibrated on `target` with
// the --calibration folder (a progress bar on stderr). Nothing when no flag is set. Fails when
// more than one precision is chosen, or --int8 has no --calibration. With int8, `report`
// receives quantize_int8's report; `observed` (an earlier report's ranges for this model) spares
// calibrating again, and then the folder is read only for values it lacks.
Status apply_quantization(compiler::Graph& graph, const QuantizeFlags& flags,
                          const compiler::Target& target, compiler::Int8Report* report = nullptr,
                          std::shared_ptr<const compiler::ObservedRanges> observed = nullptr);

}  // namespace kiln::tools
