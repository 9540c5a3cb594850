// SPDX-License-Identifier: Apache-2.0
// Compiling an imported model for `kiln run` and `kiln perf`, through the compile cache.
#include "tools/compile_model.h"

#include <fmt/format.h>

#include <chrono>

#include "compiler/cache/compile_cache.h"

namespace kiln::tools {

Result<CompiledForRun> compile_for_run(const std::string& path, PreparedModel& prepared,
                                       const CompileChoice& choice) {
  using Ms = std::chrono::duration<double, std::milli>;
  const auto start = std::chrono::steady_clock::now();
  std::shared_ptr<compiler::Graph> graph(std::move(prepared.model->graph));
  CompiledForRun out;
  if (!choice.use_cache) {
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<compiler::Target> target,
                          compiler::make_target(choice.target));
    if (choice.rewrite) KILN_RETURN_IF_ERROR(choice.rewrite(*graph, *target));
    KILN_ASSIGN_OR_RETURN(out.executable, compiler::compile(graph, *target, choice.options));
  } else {
    KILN_ASSIGN_OR_RETURN(compiler::ModelSource model, compiler::ModelSource::from_file(path));
    compiler::CompileRequest request;
    request.target = choice.target;
    request.import = prepared.import;
    request.options = choice.options;
    request.rewrite = choice.rewrite;
    request.rewrite_flags = choice.rewrite_flags;
    request.data_hash = choice.data_hash;
    compiler::CompileCache cache;
    KILN_ASSIGN_OR_RETURN(compiler::CompiledModel compiled,
                          cache.get(model, request, std::move(graph)));
    out.executable = std::move(compiled.executable);
    out.from_cache = compiled.from != compiler::CompiledModel::From::kCompiled;
  }
  out.ms = Ms(std::chrono::steady_clock::now() - start).count();
  out.how = out.from_cache ? fmt::format("loaded from the compile cache in {:.1f} ms", out.ms)
                           : fmt::format("compiled in {:.1f} ms", out.ms);
  return out;
}

}  // namespace kiln::tools
