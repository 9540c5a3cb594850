// SPDX-License-Identifier: Apache-2.0
// The pipeline backend (alias rocal): a JSON pipeline run on the encoded images requests carry.
#pragma once

#include <memory>

#include "server/backends/backend.h"

namespace kiln::server {

std::unique_ptr<Backend> make_pipeline_backend();

}  // namespace kiln::server
