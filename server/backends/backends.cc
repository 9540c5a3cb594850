// SPDX-License-Identifier: Apache-2.0
// The list of backends: one plain function that names them, no static registration.
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>

#include "compiler/cache/compile_cache.h"
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

bool inside_root(const std::filesystem::path& root, const std::filesystem::path& path) {
  std::error_code ec;
  const std::filesystem::path real = std::filesystem::weakly_canonical(path, ec);
  if (ec) return false;
  auto r = root.begin();
  auto p = real.begin();
  for (; r != root.end(); ++r, ++p) {
    if (r->empty()) continue;  // a trailing separator
    if (p == real.end() || *p != *r) return false;
  }
  return true;
}

namespace {

// `found`, or permission denied when it resolves (through a symbolic link) outside the
// repository.
Result<std::filesystem::path> checked_inside(const BackendContext& ctx, std::string_view parameter,
                                             const std::filesystem::path& found) {
  if (!ctx.root.empty() && !inside_root(ctx.root, found)) {
    return permission_denied_error(fmt::format(
        "model \"{}\": {} {} resolves, through a symbolic link, to a place outside the model "
        "repository {}; copy it into the repository",
        ctx.config.name, parameter == "model" ? "model file" : parameter, found.string(),
        ctx.root.string()));
  }
  return found;
}

}  // namespace

std::filesystem::path default_cache_dir() {
  return compiler::default_compile_cache_dir();
}

Result<std::filesystem::path> repository_path(const BackendContext& ctx, std::string_view parameter,
                                              const std::string& given) {
  const std::string& model = ctx.config.name;
  std::filesystem::path p(given);
  if (!ctx.root.empty()) {
    const bool up = std::any_of(p.begin(), p.end(), [](const auto& part) { return part == ".."; });
    if (p.empty() || p.is_absolute() || up) {
      return invalid_argument_error(
          fmt::format("model \"{}\": parameter {} \"{}\" must be a relative path inside the model "
                      "repository, without \"..\"",
                      model, parameter, given));
    }
  }
  if (p.is_relative()) p = ctx.version_dir / p;
  std::error_code ec;
  if (!std::filesystem::exists(p, ec)) {
    return not_found_error(
        fmt::format("model \"{}\": {} {} does not exist", model, parameter, p.string()));
  }
  return checked_inside(ctx, parameter, p);
}

Result<std::filesystem::path> find_model_file(const BackendContext& ctx,
                                              std::string_view extension) {
  const std::string& model = ctx.config.name;
  KILN_ASSIGN_OR_RETURN(std::optional<std::string> given,
                        ctx.config.parameters.get_string("model"));
  std::error_code ec;
  if (given) {
    KILN_ASSIGN_OR_RETURN(std::filesystem::path p, repository_path(ctx, "model", *given));
    if (!std::filesystem::is_regular_file(p, ec)) {
      return not_found_error(
          fmt::format("model \"{}\": model file {} is not a file", model, p.string()));
    }
    return p;
  }
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(ctx.version_dir, ec)) {
    if (entry.path().extension() == extension) files.push_back(entry.path());
  }
  if (files.size() != 1) {
    return not_found_error(
        fmt::format("model \"{}\": expected one {} file in {}, found {}; name it with the `model` "
                    "parameter",
                    model, extension, ctx.version_dir.string(), files.size()));
  }
  return checked_inside(ctx, "model", files[0]);
}

}  // namespace kiln::server
