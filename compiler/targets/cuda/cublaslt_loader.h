// SPDX-License-Identifier: Apache-2.0
// cuBLASLt, loaded on first use: libcublasLt is half a gigabyte, and linking it would cost every
// kiln process (the CLI, the server, the Python module) ~150 MiB of resident memory at start-up.
#pragma once

#include "core/status.h"

namespace kiln::compiler::cuda {

// Loads libcublasLt.so (once per process). The cublasLt* functions kiln calls forward to it; before
// it is loaded, or if it cannot be, they return CUBLAS_STATUS_NOT_INITIALIZED. The error names the
// library, the loader's reason and what to install.
Status load_cublaslt();

}  // namespace kiln::compiler::cuda
