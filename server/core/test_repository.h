// SPDX-License-Identifier: Apache-2.0
// A model repository for tests, written to a temporary folder: echo models, the tiny CNN example
// served by the compiler backend, and a broken model; random images for the CNN.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "core/tensor.h"

namespace kiln::server::testing {

// Writes `<root>/<name>/config.toml` and `<root>/<name>/1/`.
inline void add_model(const std::filesystem::path& root, const std::string& name,
                      const std::string& config) {
  std::filesystem::create_directories(root / name / "1");
  std::ofstream(root / name / "config.toml") << config;
}

// The tiny CNN (image f32[batch,1,28,28] -> probabilities f32[batch,10]) from examples/models.
inline std::string tiny_cnn_path() {
  return std::string(KILN_SOURCE_DIR) + "/examples/models/tiny_cnn.onnx";
}

// f32[batch,1,28,28], uniform in [0, 1) from `seed`: images for the tiny CNN.
inline Tensor random_image(int64_t batch, uint64_t seed) {
  Tensor t(DType::kF32, Shape{batch, 1, 28, 28});
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::uniform_real_distribution<float> dist(0.f, 1.f);
  for (float& v : t.span<float>()) v = dist(rng);
  return t;
}

// A repository with: echo (no batching), echo_batched (max_batch_size 8, 2 ms delay, 2
// instances), mnist (compiler, batch 4), broken (a config with an unknown key).
inline std::filesystem::path make_test_repository(const std::string& tag) {
  std::filesystem::path root = std::filesystem::temp_directory_path() /
                               ("kiln_repo_" + tag + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(root);
  add_model(root, "echo", "backend = \"echo\"\n");
  add_model(root, "echo_batched",
            "backend = \"echo\"\ninstances = 2\nmax_batch_size = 8\n[dynamic_batching]\n"
            "max_queue_delay_microseconds = 2000\n");
  add_model(root, "mnist",
            "platform = \"onnx_onnxv1\"\nmax_batch_size = 4\n[dynamic_batching]\n"
            "max_queue_delay_microseconds = 2000\n[parameters]\ntarget = \"cpu\"\n");
  std::filesystem::copy_file(tiny_cnn_path(), root / "mnist" / "1" / "model.onnx");
  add_model(root, "broken", "backend = \"echo\"\nmax_batch = 4\n");
  return root;
}

}  // namespace kiln::server::testing
