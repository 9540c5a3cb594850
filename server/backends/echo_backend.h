// SPDX-License-Identifier: Apache-2.0
// The echo backend: returns each request's inputs as its outputs (for tests and overhead figures).
#pragma once

#include <memory>

#include "server/backends/backend.h"

namespace kiln::server {

std::unique_ptr<Backend> make_echo_backend();

}  // namespace kiln::server
