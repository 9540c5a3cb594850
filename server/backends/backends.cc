// SPDX-License-Identifier: Apache-2.0
// The list of backends: one plain function that names them, no static registration.
#include <fmt/format.h>

#include "server/backends/backend.h"
#include "server/backends/compiler_backend.h"
#include "server/backends/echo_backend.h"

namespace kiln::server {

std::vector<std::string> backend_names() {
  return {"compiler", "echo", "migraphx"};
}

Result<std::unique_ptr<Backend>> make_backend(std::string_view name) {
  if (name == "echo") return make_echo_backend();
  if (name == "compiler" || name == "migraphx") return make_compiler_backend();
  return not_found_error(fmt::format("backend \"{}\" does not exist; the backends are: {}", name,
                                     fmt::join(backend_names(), ", ")));
}

}  // namespace kiln::server
