// SPDX-License-Identifier: Apache-2.0
// The list of backends: one plain function that names them, no static registration.
#include <fmt/format.h>

#include "server/backends/backend.h"
#include "server/backends/chain_backend.h"
#include "server/backends/compiler_backend.h"
#include "server/backends/echo_backend.h"
#include "server/backends/pipeline_backend.h"

namespace kiln::server {

std::vector<std::string> backend_names() {
  return {"chain", "compiler", "echo", "migraphx", "pipeline", "rocal"};
}

Result<std::unique_ptr<Backend>> make_backend(std::string_view name) {
  if (name == "echo") return make_echo_backend();
  if (name == "compiler" || name == "migraphx") return make_compiler_backend();
  if (name == "pipeline" || name == "rocal") return make_pipeline_backend();
  if (name == "chain") return make_chain_backend();
  return not_found_error(fmt::format("backend \"{}\" does not exist; the backends are: {}", name,
                                     fmt::join(backend_names(), ", ")));
}

Result<std::filesystem::path> find_model_file(const BackendContext& ctx,
                                              std::string_view extension) {
  const std::string& model = ctx.config.name;
  KILN_ASSIGN_OR_RETURN(std::optional<std::string> given,
                        ctx.config.parameters.get_string("model"));
  std::error_code ec;
  if (given) {
    std::filesystem::path p(*given);
    if (p.is_relative()) p = ctx.version_dir / p;
    if (!std::filesystem::is_regular_file(p, ec)) {
      return not_found_error(
          fmt::format("model \"{}\": model file {} does not exist", model, p.string()));
    }
    return p;
  }
  std::vector<std::filesystem::path> found;
  for (const auto& entry : std::filesystem::directory_iterator(ctx.version_dir, ec)) {
    if (entry.path().extension() == extension) found.push_back(entry.path());
  }
  if (found.size() != 1) {
    return not_found_error(fmt::format(
        "model \"{}\": expected one {} file in {}, found {}; name it with the `model` parameter",
        model, extension, ctx.version_dir.string(), found.size()));
  }
  return found[0];
}

}  // namespace kiln::server
