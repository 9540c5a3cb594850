// SPDX-License-Identifier: Apache-2.0
// NVML loaded at run time: a missing library or one without NVML's functions is a clear error
// (and no GPU gauges), never a crash; where NVIDIA's driver is installed the gauges are sane.
#include "server/core/nvml.h"

#include <gtest/gtest.h>

namespace kiln::server {
namespace {

TEST(Nvml, AMissingLibraryIsNotFoundNamingIt) {
  Result<std::unique_ptr<NvmlReader>> r = NvmlReader::open("libkiln-no-such-nvml.so.1");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("libkiln-no-such-nvml.so.1"), std::string::npos);
}

TEST(Nvml, ALibraryWithoutNvmlsFunctionsIsUnavailable) {
  // The C maths library loads everywhere and has no nvmlInit_v2.
  Result<std::unique_ptr<NvmlReader>> r = NvmlReader::open("libm.so.6");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("nvmlInit_v2"), std::string::npos) << r.status().message();
}

TEST(Nvml, TheDriversLibraryGivesSaneGaugesWhereItIsInstalled) {
  Result<std::unique_ptr<NvmlReader>> r = NvmlReader::open();
  if (!r.ok()) {
    // No NVIDIA driver here (or no GPU for it): a clear reason, and the server shows no gauges.
    EXPECT_TRUE(r.status().code() == StatusCode::kNotFound ||
                r.status().code() == StatusCode::kUnavailable)
        << r.status().to_string();
    GTEST_SKIP() << r.status().message();
  }
  std::vector<GpuSample> gpus = (*r)->read();
  ASSERT_FALSE(gpus.empty()) << "NVML loaded but reports no GPU";
  for (const GpuSample& g : gpus) {
    EXPECT_EQ(g.uuid.rfind("GPU-", 0), 0u) << g.uuid;
    ASSERT_TRUE(g.memory_total_bytes.has_value());
    EXPECT_GT(*g.memory_total_bytes, uint64_t{1} << 30);
    EXPECT_LE(g.memory_used_bytes.value_or(0), *g.memory_total_bytes);
    if (g.utilization) {
      EXPECT_GE(*g.utilization, 0.0);
      EXPECT_LE(*g.utilization, 1.0);
    }
    if (g.power_watts) {
      EXPECT_GT(*g.power_watts, 0.0);
      EXPECT_LT(*g.power_watts, 2000.0);
    }
  }
}

}  // namespace
}  // namespace kiln::server
