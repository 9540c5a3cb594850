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
  (*server)->shutdown();
  fs::remove_all(root);
}

}  // namespace
}  // namespace kiln::server::http
