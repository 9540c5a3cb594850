// SPDX-License-Identifier: Apache-2.0
// The chain backend: an ensemble of the server's models run one after another, each step's
// outputs feeding later steps' inputs by name (Triton's ensemble scheduling, linear).
#pragma once

#include <memory>

#include "server/backends/backend.h"

namespace kiln::server {

std::unique_ptr<Backend> make_chain_backend();

}  // namespace kiln::server
