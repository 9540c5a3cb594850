// SPDX-License-Identifier: Apache-2.0
// Where kiln keeps its caches (compiled models, NVRTC kernels): one root for every part.
#pragma once

#include <filesystem>

namespace kiln {

// The root of kiln's caches: $KILN_CACHE_DIR when set and not empty, else $XDG_CACHE_HOME/kiln,
// else $HOME/.cache/kiln (/tmp/.cache/kiln without a HOME). Read on every call. The compile cache
// uses <root>/artifacts, the cuda target's NVRTC kernels <root>/nvrtc. Never a model's folder.
std::filesystem::path cache_root();

}  // namespace kiln
