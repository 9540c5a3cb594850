// SPDX-License-Identifier: Apache-2.0
// The Prometheus text of a server that ran real requests: Triton's series (nv_inference_*) carry
// the same counts as kiln's, per model and version.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <sstream>
#include <string>

#include "server/core/server.h"
#include "server/core/test_repository.h"
#include "server/http/router.h"

namespace kiln::server::http {
namespace {

namespace fs = std::filesystem;

// "series{labels} value" lines (comments skipped) as series -> value.
std::map<std::string, double> parse(const std::string& text) {
  std::map<std::string, double> values;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    size_t space = line.rfind(' ');
    values[line.substr(0, space)] = std::strtod(line.c_str() + space + 1, nullptr);
  }
  return values;
}

InferenceRequest request(const std::string& model, Tensor image) {
  InferenceRequest r;
  r.model = model;
  r.inputs.push_back({"image", std::move(image), {}});
  return r;
}

TEST(Metrics, TritonNamesCarryTheSameCountsAsKilns) {
  fs::path root = testing::make_test_repository("metrics");
  Result<std::unique_ptr<Server>> server = Server::create({root, false, {"echo_batched", "mnist"}});
  ASSERT_TRUE(server.ok()) << server.status().to_string();
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE((*server)->infer(request("mnist", testing::random_image(1, i))).get().ok());
  }
  // A wrong image size fails as invalid.
  EXPECT_FALSE(
      (*server)->infer(request("mnist", Tensor(DType::kF32, Shape{1, 1, 3, 3}))).get().ok());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE((*server)->infer(request("echo_batched", testing::random_image(2, i))).get().ok());
  }
  std::map<std::string, double> v = parse(prometheus_metrics(**server));

  for (const std::string model : {"mnist", "echo_batched"}) {
    const std::string l = "{model=\"" + model + "\",version=\"1\"}";
    SCOPED_TRACE(model);
    EXPECT_EQ(v.at("nv_inference_request_success" + l), v.at("kiln_inference_request_success" + l));
    EXPECT_EQ(v.at("nv_inference_count" + l), v.at("kiln_inference_count" + l));
    EXPECT_EQ(v.at("nv_inference_exec_count" + l), v.at("kiln_inference_exec_count" + l));
    EXPECT_EQ(v.at("nv_inference_pending_request_count" + l), 0);
    // The same nanoseconds: Triton's counter in whole microseconds, kiln's histogram sum in
    // fractional ones.
    const double queue_sum = v.at("kiln_inference_queue_duration_us_sum" + l);
    EXPECT_LE(v.at("nv_inference_queue_duration_us" + l), queue_sum);
    EXPECT_GT(v.at("nv_inference_queue_duration_us" + l) + 1, queue_sum);
    EXPECT_GE(v.at("nv_inference_request_duration_us" + l),
              v.at("nv_inference_queue_duration_us" + l));
  }
  const std::string mnist = "{model=\"mnist\",version=\"1\"}";
  EXPECT_EQ(v.at("nv_inference_request_success" + mnist), 5);
  EXPECT_EQ(v.at("nv_inference_request_failure" + mnist), 1);
  EXPECT_EQ(
      v.at("kiln_inference_request_failure{model=\"mnist\",version=\"1\",reason=\"invalid\"}"), 1);
  const std::string echo = "{model=\"echo_batched\",version=\"1\"}";
  EXPECT_EQ(v.at("nv_inference_request_success" + echo), 3);
  EXPECT_EQ(v.at("nv_inference_request_failure" + echo), 0);
  EXPECT_EQ(prometheus_metrics(**server).find("nv_gpu"), std::string::npos);
  EXPECT_EQ(prometheus_metrics(**server).find("kiln_trace"), std::string::npos);  // no exporter
  (*server)->shutdown();
  fs::remove_all(root);
}

// Fixed samples: they stand in for NVML only to check the text.
class FixedGpus final : public GpuReader {
 public:
  explicit FixedGpus(std::vector<GpuSample> samples) : samples_(std::move(samples)) {}
  std::vector<GpuSample> read() const override { return samples_; }

 private:
  std::vector<GpuSample> samples_;
};

TEST(Metrics, GpuGaugesCarryTritonsNamesAndLabels) {
  const std::vector<GpuSample> gpus = {
      {"GPU-5a4f", 0.5, uint64_t{80} << 30, uint64_t{3} << 30, 312.25},
      {"GPU-\"b\"", std::nullopt, uint64_t{16} << 30, 0, std::nullopt}};
  EXPECT_EQ(gpu_metrics(gpus),
            "# HELP nv_gpu_utilization GPU utilization rate [0.0 - 1.0)\n"
            "# TYPE nv_gpu_utilization gauge\n"
            "nv_gpu_utilization{gpu_uuid=\"GPU-5a4f\"} 0.5\n"
            "# HELP nv_gpu_memory_total_bytes GPU total memory, in bytes\n"
            "# TYPE nv_gpu_memory_total_bytes gauge\n"
            "nv_gpu_memory_total_bytes{gpu_uuid=\"GPU-5a4f\"} 85899345920\n"
            "nv_gpu_memory_total_bytes{gpu_uuid=\"GPU-\\\"b\\\"\"} 17179869184\n"
            "# HELP nv_gpu_memory_used_bytes GPU used memory, in bytes\n"
            "# TYPE nv_gpu_memory_used_bytes gauge\n"
            "nv_gpu_memory_used_bytes{gpu_uuid=\"GPU-5a4f\"} 3221225472\n"
            "nv_gpu_memory_used_bytes{gpu_uuid=\"GPU-\\\"b\\\"\"} 0\n"
            "# HELP nv_gpu_power_usage GPU power usage in watts\n"
            "# TYPE nv_gpu_power_usage gauge\n"
            "nv_gpu_power_usage{gpu_uuid=\"GPU-5a4f\"} 312.25\n");
  EXPECT_EQ(gpu_metrics({}), "");
  // prometheus_metrics appends them when given a reader.
  fs::path root = testing::make_test_repository("metrics_gpu");
  Result<std::unique_ptr<Server>> server = Server::create({root, false, {"echo"}});
  ASSERT_TRUE(server.ok()) << server.status().to_string();
  FixedGpus reader(gpus);
  const std::string text = prometheus_metrics(**server, &reader);
  EXPECT_NE(text.find("kiln_inference_request_success{model=\"echo\",version=\"1\"} 0\n"),
            std::string::npos);
  EXPECT_EQ(text.substr(text.size() - gpu_metrics(gpus).size()), gpu_metrics(gpus));
  (*server)->shutdown();
  fs::remove_all(root);
}

TEST(Metrics, WithoutNvmlThereAreNoGpuSeriesAndNothingFails) {
  Result<std::unique_ptr<NvmlReader>> nvml = NvmlReader::open("libkiln-no-such-nvml.so.1");
  ASSERT_FALSE(nvml.ok());
  fs::path root = testing::make_test_repository("metrics_nogpu");
  Result<std::unique_ptr<Server>> server = Server::create({root, false, {"echo"}});
  ASSERT_TRUE(server.ok()) << server.status().to_string();
  const std::string text = prometheus_metrics(**server, nvml.ok() ? nvml->get() : nullptr);
  EXPECT_NE(text.find("kiln_inference_count"), std::string::npos);
  EXPECT_EQ(text.find("nv_gpu"), std::string::npos);
  (*server)->shutdown();
  fs::remove_all(root);
}

}  // namespace
}  // namespace kiln::server::http
