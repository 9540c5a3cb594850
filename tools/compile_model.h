// SPDX-License-Identifier: Apache-2.0
// What `kiln run` and `kiln perf` share to turn an imported .onnx model into an executable: the
// compile cache (compiler/cache), or a plain compile with --no-cache.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "compiler/targets/target.h"
#include "core/status.h"
#include "tools/model_io.h"

namespace kiln::tools {

struct CompileChoice {
  std::string target = "ref";
  compiler::CompileOptions options;
  // Applied to the imported graph before compiling (precision, quantization); may be null.
  std::function<Status(compiler::Graph&, const compiler::Target&)> rewrite;
  // The rewrite as `kiln compile` flags ({"fp16", ""}); part of the cache key.
  std::vector<std::pair<std::string, std::string>> rewrite_flags;
  // The hash of the data the rewrite reads (int8's calibration folder: QuantizeFlags::data_hash);
  // part of the cache key.
  uint64_t data_hash = 0;
  // Through the compile cache: false for --no-cache, and for int8 whose calibration data could
  // not be hashed (the rewrite then says what is wrong with it).
  bool use_cache = true;
};

struct CompiledForRun {
  std::shared_ptr<compiler::Executable> executable;
  bool from_cache = false;  // loaded from a cached artifact (or this process's memory)
  double ms = 0;            // how long compiling (or loading) took
  std::string how;          // "compiled in 12.3 ms", "loaded from the compile cache in 4.5 ms"
};

// Compiles `prepared.model` (an imported .onnx model, read from `path` with prepared.import) as
// `choice` says. The graph is moved out of `prepared`.
Result<CompiledForRun> compile_for_run(const std::string& path, PreparedModel& prepared,
                                       const CompileChoice& choice);

}  // namespace kiln::tools
