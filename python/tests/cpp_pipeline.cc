// SPDX-License-Identifier: Apache-2.0
// The C++ side of the Python pipeline tests and benchmark: runs the classification pipeline
// (readers.file -> decoders.image -> resize [-> crop_mirror_normalize with a random mirror])
// straight on the executor, writes each batch as .npy files and prints images/s as JSON.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "core/npy.h"
#include "pipeline/executor/pipeline.h"

namespace {

using kiln::pipeline::ArgMap;
using kiln::pipeline::OpSpec;

struct Options {
  std::string file_root;
  int64_t batch_size = 4;
  int threads = 2;
  int64_t width = 32, height = 24;
  int64_t crop = 0;  // >0: crop_mirror_normalize to crop x crop with a random mirror
  uint64_t seed = 0;
  bool shuffle = false;
  std::string last_batch_policy = "partial";
  int epochs = 1;
  std::string out_dir;  // empty: no files
};

int usage(const std::string& problem) {
  fmt::print(stderr,
             "cpp_pipeline: {}\nusage: cpp_pipeline --file-root DIR [--batch-size N] [--threads N] "
             "[--resize WxH] [--crop N] [--seed N] [--shuffle] [--last-batch-policy P] "
             "[--epochs N] [--out-dir DIR]\n",
             problem);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag == "--shuffle") {
      o.shuffle = true;
      continue;
    }
    if (i + 1 >= argc) return usage(fmt::format("{} needs a value", flag));
    std::string v = argv[++i];
    if (flag == "--file-root") {
      o.file_root = v;
    } else if (flag == "--batch-size") {
      o.batch_size = std::atoll(v.c_str());
    } else if (flag == "--threads") {
      o.threads = std::atoi(v.c_str());
    } else if (flag == "--resize") {
      if (std::sscanf(v.c_str(), "%ldx%ld", &o.width, &o.height) != 2) {
        return usage(fmt::format("--resize {}: expected WxH", v));
      }
    } else if (flag == "--crop") {
      o.crop = std::atoll(v.c_str());
    } else if (flag == "--seed") {
      o.seed = std::strtoull(v.c_str(), nullptr, 10);
    } else if (flag == "--last-batch-policy") {
      o.last_batch_policy = v;
    } else if (flag == "--epochs") {
      o.epochs = std::atoi(v.c_str());
    } else if (flag == "--out-dir") {
      o.out_dir = v;
    } else {
      return usage(fmt::format("unknown flag {}", flag));
    }
  }
  if (o.file_root.empty()) return usage("--file-root is required");

  std::vector<OpSpec> ops = {
      {"readers.file",
       ArgMap{{"file_root", o.file_root},
              {"random_shuffle", o.shuffle},
              {"last_batch_policy", o.last_batch_policy}},
       {},
       {"encoded", "label"},
       {}},
      {"decoders.image", {}, {"encoded"}, {"decoded"}, {}},
      {"resize",
       ArgMap{{"resize_x", o.width}, {"resize_y", o.height}},
       {"decoded"},
       {"images"},
       {}},
  };
  if (o.crop > 0) {
    ops.push_back({"random.coin_flip", ArgMap{{"probability", 0.5}}, {}, {"coin"}, {}});
    ops.push_back({"crop_mirror_normalize",
                   ArgMap{{"crop", std::vector<int64_t>{o.crop, o.crop}},
                          {"mean", std::vector<double>{0.485 * 255, 0.456 * 255, 0.406 * 255}},
                          {"std", std::vector<double>{0.229 * 255, 0.224 * 255, 0.225 * 255}}},
                   {"images"},
                   {"normalized"},
                   {{"mirror", "coin"}}});
  }
  kiln::pipeline::PipelineOptions options;
  options.batch_size = o.batch_size;
  options.num_threads = o.threads;
  options.seed = o.seed;
  options.outputs = {o.crop > 0 ? "normalized" : "images", "label"};
  auto pipeline = kiln::pipeline::Pipeline::create(options, std::move(ops));
  if (!pipeline.ok()) {
    fmt::print(stderr, "cpp_pipeline: {}\n", pipeline.status().to_string());
    return 1;
  }
  if (!o.out_dir.empty()) std::filesystem::create_directories(o.out_dir);
  // Per epoch, as `kiln pipeline bench` times it: from after reset() to the end of the epoch.
  int64_t images = 0, batches = 0;
  std::vector<double> rates;
  for (int epoch = 0; epoch < o.epochs; ++epoch) {
    if (epoch > 0) (*pipeline)->reset();
    int64_t epoch_images = 0;
    auto start = std::chrono::steady_clock::now();
    for (;;) {
      auto batch = (*pipeline)->run();
      if (!batch.ok()) {
        fmt::print(stderr, "cpp_pipeline: {}\n", batch.status().to_string());
        return 1;
      }
      if (!batch->has_value()) break;
      const kiln::pipeline::Batch& b = **batch;
      epoch_images += static_cast<int64_t>(b.paths.size()) - b.num_padded;
      if (!o.out_dir.empty()) {
        for (size_t k = 0; k < b.outputs.size(); ++k) {
          const kiln::pipeline::TensorList& list = b.outputs[k];
          for (size_t s = 0; s < list.samples.size(); ++s) {
            std::string path =
                fmt::format("{}/e{}_b{}_o{}_s{}.npy", o.out_dir, epoch, batches, k, s);
            kiln::Status st = kiln::write_npy(path, list.samples[s].view());
            if (!st.ok()) {
              fmt::print(stderr, "cpp_pipeline: {}\n", st.to_string());
              return 1;
            }
          }
        }
      }
      ++batches;
    }
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    rates.push_back(seconds > 0 ? static_cast<double>(epoch_images) / seconds : 0.0);
    images += epoch_images;
  }
  // The first epoch warms the page cache and the allocator; the later ones are the figure.
  std::vector<double> warm(rates.begin() + (rates.size() > 1 ? 1 : 0), rates.end());
  std::sort(warm.begin(), warm.end());
  fmt::print(
      "{{\"images\": {}, \"batches\": {}, \"epoch_images_per_second\": [{:.3f}], "
      "\"images_per_second\": {:.3f}}}\n",
      images, batches, fmt::join(rates, ", "), warm.empty() ? 0.0 : warm[warm.size() / 2]);
  return 0;
}
