// SPDX-License-Identifier: Apache-2.0
// GPU discovery and the device fill kernel; skips (never fails) on a machine without a GPU.
#include "core/gpu.h"

#include <gtest/gtest.h>

#ifdef KILN_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "core/kernels/fill.h"
#endif

namespace kiln {
namespace {

TEST(Gpu, ListsDevicesOrSaysWhyNone) {
  std::string why;
  std::vector<GpuInfo> gpus = list_gpus(&why);
  if (gpus.empty()) GTEST_SKIP() << "no GPU: " << why;
  for (const GpuInfo& g : gpus) {
    EXPECT_FALSE(g.name.empty());
    EXPECT_GE(g.compute_major, 5);
    EXPECT_GT(g.memory_bytes, int64_t{1} << 30);
    EXPECT_GT(g.multiprocessors, 0);
  }
}

#ifdef KILN_HAVE_CUDA
TEST(Gpu, FillKernelWritesEveryElement) {
  if (list_gpus().empty()) GTEST_SKIP() << "no GPU";
  const int64_t n = (int64_t{1} << 24) + 77;  // more than one grid-stride pass, odd tail
  void* raw = nullptr;
  ASSERT_EQ(cudaMalloc(&raw, n * sizeof(float)), cudaSuccess);
  auto* device = static_cast<float*>(raw);
  ASSERT_TRUE(kernels::fill_f32_cuda(device, n, 2.5f).ok());
  std::vector<float> host(static_cast<size_t>(n), 0.0f);
  ASSERT_EQ(cudaMemcpy(host.data(), device, n * sizeof(float), cudaMemcpyDeviceToHost),
            cudaSuccess);
  cudaFree(device);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(host[static_cast<size_t>(i)], 2.5f) << i;
}
#endif

}  // namespace
}  // namespace kiln
