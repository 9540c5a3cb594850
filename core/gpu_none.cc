// SPDX-License-Identifier: Apache-2.0
// GPU discovery in a build without CUDA: there are none.
#include "core/gpu.h"

namespace kiln {

bool built_with_cuda() {
  return false;
}

std::vector<GpuInfo> list_gpus(std::string* why_none) {
  if (why_none) *why_none = "kiln was built without CUDA (no nvcc at configure time)";
  return {};
}

namespace {
Status no_cuda() {
  return unavailable_error("kiln was built without CUDA: there is no GPU memory to use");
}
}  // namespace

Result<std::shared_ptr<void>> gpu_alloc(size_t) {
  return no_cuda();
}

Status gpu_upload(void*, const void*, size_t) {
  return no_cuda();
}

Status gpu_download(void*, const void*, size_t) {
  return no_cuda();
}

}  // namespace kiln
