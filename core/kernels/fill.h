// SPDX-License-Identifier: Apache-2.0
// Launcher for the device fill kernel (kernels/fill.cu): plain C++, no CUDA headers needed.
#pragma once

#include <cstdint>

#include "core/status.h"

namespace kiln::kernels {

// Sets `count` floats at device pointer `dst` to `value` on the default stream and waits.
// Fails with the CUDA error string (kUnavailable) when the launch or the device fails.
Status fill_f32_cuda(float* dst, int64_t count, float value);

}  // namespace kiln::kernels
