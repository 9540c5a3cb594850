// SPDX-License-Identifier: Apache-2.0
// What the transport tests (HTTP, gRPC) share: requests for the test repository
// (server/core/test_repository.h) and the check that many client threads at once each get the
// answers to their own requests. Tests only (needs gtest).
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "client/client.h"
#include "client/native_client.h"
#include "server/core/test_repository.h"

namespace kiln::client::testing {

inline server::InferenceRequest request(std::vector<server::InferTensor> inputs,
                                        std::string id = "") {
  server::InferenceRequest r;
  r.id = std::move(id);
  r.inputs = std::move(inputs);
  return r;
}

// `clients` threads send `requests` requests each, thread t through make_client(t) (which may
// hand several threads one shared client): every 8th an image to "mnist", compared with the
// in-process server's answer, the others a random INT32 vector of 1..max_elements to "echo" or
// "echo_batched". Every answer must carry its request's id and exactly its own data.
inline void expect_every_client_gets_its_own_answers(
    server::Server* server, int clients, int requests, int64_t max_elements,
    const std::function<std::shared_ptr<Client>(int)>& make_client) {
  NativeClient native(server);
  std::vector<Tensor> images;
  std::vector<Tensor> expected;
  for (uint32_t i = 0; i < 8; ++i) {
    images.push_back(server::testing::random_image(1, 100 + i));
    auto r = native.model_infer("mnist", request({{"image", images.back(), {}}}));
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    expected.push_back(r->outputs[0].data);
  }
  std::atomic<int> wrong{0}, failed{0};
  std::string first_error;
  std::mutex error_mutex;
  std::vector<std::thread> threads;
  for (int t = 0; t < clients; ++t) {
    threads.emplace_back([&, t] {
      std::shared_ptr<Client> c = make_client(t);
      std::mt19937 rng(static_cast<uint32_t>(t));
      for (int i = 0; i < requests; ++i) {
        std::string id = std::to_string(t) + "/" + std::to_string(i);
        Result<server::InferenceResponse> r = unknown_error("not sent");
        bool ok = false;
        if (i % 8 == 0) {
          size_t k = rng() % images.size();
          r = c->model_infer("mnist", request({{"image", images[k], {}}}, id));
          ok = r.ok() && r->id == id && r->outputs.size() == 1 &&
               r->outputs[0].data.equals(expected[k]);
        } else {
          int64_t n = 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(max_elements));
          std::vector<int32_t> v(static_cast<size_t>(n));
          for (auto& x : v) x = static_cast<int32_t>(rng());
          Tensor x = Tensor::from_vector<int32_t>(v);
          r = c->model_infer(i % 2 ? "echo" : "echo_batched", request({{"x", x, {}}}, id));
          ok = r.ok() && r->id == id && r->outputs.size() == 1 && r->outputs[0].data.equals(x);
        }
        if (!r.ok()) {
          ++failed;
          std::lock_guard<std::mutex> lock(error_mutex);
          if (first_error.empty()) first_error = r.status().to_string();
        } else if (!ok) {
          ++wrong;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failed.load(), 0) << first_error;
  EXPECT_EQ(wrong.load(), 0);
}

}  // namespace kiln::client::testing
