// SPDX-License-Identifier: Apache-2.0
// classify_digits: sends held-out digit images to a running `kiln serve` and prints each image's
// predicted class, confidence, true label and latency, then the accuracy and median latency.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "client/grpc_client.h"
#include "client/http_client.h"
#include "core/mapped_file.h"

namespace {

using kiln::Result;
using kiln::Status;
using kiln::client::Client;

struct Image {
  std::string file;
  int label = -1;
  kiln::Tensor tensor;   // [1, 1, h, w] float32 in [0, 1]
  kiln::Tensor encoded;  // BYTES [1]: the same digit's PNG file, for models that decode images
};

struct Prediction {
  int cls = -1;
  float confidence = 0;
};

// Reads a binary PGM (P5, maxval < 256) as grey level / maxval.
Result<kiln::Tensor> read_pgm(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return kiln::not_found_error(fmt::format("image {} cannot be opened", path.string()));
  }
  std::string magic;
  int width = 0, height = 0, maxval = 0;
  in >> magic >> width >> height >> maxval;
  if (!in || magic != "P5" || width <= 0 || height <= 0 || maxval <= 0 || maxval > 255) {
    return kiln::invalid_argument_error(fmt::format(
        "image {}: expected a binary PGM (P5, grey levels up to 255), found header \"{} {} {} {}\"",
        path.string(), magic, width, height, maxval));
  }
  in.get();  // the one whitespace byte after maxval
  std::vector<unsigned char> pixels(static_cast<size_t>(width) * height);
  in.read(reinterpret_cast<char*>(pixels.data()), static_cast<std::streamsize>(pixels.size()));
  if (in.gcount() != static_cast<std::streamsize>(pixels.size())) {
    return kiln::invalid_argument_error(fmt::format("image {}: expected {} pixel bytes, found {}",
                                                    path.string(), pixels.size(), in.gcount()));
  }
  std::vector<float> values(pixels.size());
  for (size_t i = 0; i < pixels.size(); ++i) {
    values[i] = static_cast<float>(pixels[i]) / static_cast<float>(maxval);
  }
  return kiln::Tensor::from_vector<float>(std::span<const float>(values),
                                          kiln::Shape{1, 1, height, width});
}

// Reads `labels.txt` ("file label" lines, # comments) and the images it names.
Result<std::vector<Image>> read_images(const std::filesystem::path& dir) {
  const std::filesystem::path list = dir / "labels.txt";
  std::ifstream in(list);
  if (!in) {
    return kiln::not_found_error(fmt::format(
        "{} cannot be opened; give --images the folder train_digits.py wrote", list.string()));
  }
  std::vector<Image> images;
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    Image image;
    if (!(fields >> image.file >> image.label) || image.label < 0) {
      return kiln::invalid_argument_error(fmt::format(
          "{} line {}: expected \"FILE LABEL\", found \"{}\"", list.string(), number, line));
    }
    KILN_ASSIGN_OR_RETURN(image.tensor, read_pgm(dir / image.file));
    std::filesystem::path png = (dir / image.file).replace_extension(".png");
    KILN_ASSIGN_OR_RETURN(std::string bytes, kiln::read_file(png.string()));
    image.encoded = kiln::Tensor(kiln::DType::kString, kiln::Shape{1});
    image.encoded.data<std::string>()[0] = std::move(bytes);
    images.push_back(std::move(image));
  }
  if (images.empty()) {
    return kiln::invalid_argument_error(fmt::format("{} names no images", list.string()));
  }
  return images;
}

// The pixels, or the PNG bytes for a model whose input is BYTES (a pipeline or a chain).
kiln::client::InferenceRequest make_request(const Image& image, const std::string& input,
                                            bool encoded) {
  kiln::client::InferenceRequest request;
  request.id = image.file;
  request.inputs.push_back({input, encoded ? image.encoded : image.tensor, {}});
  return request;
}

// The class with the highest logit and its softmax probability.
Result<Prediction> predict(const Result<kiln::client::InferenceResponse>& response,
                           const std::string& file) {
  if (!response.ok()) return response.status().with_context(fmt::format("image {}", file));
  if (response->outputs.empty() || response->outputs[0].data.dtype() != kiln::DType::kF32 ||
      response->outputs[0].data.shape().numel() < 2) {
    return kiln::internal_error(
        fmt::format("image {}: expected one FP32 output of class scores", file));
  }
  const kiln::Tensor& logits = response->outputs[0].data;
  const float* v = logits.data<float>();
  const int64_t n = logits.shape().numel();
  const float top = *std::max_element(v, v + n);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(v[i] - top));
  Prediction p;
  p.cls = static_cast<int>(std::max_element(v, v + n) - v);
  p.confidence = static_cast<float>(1.0 / sum);
  return p;
}

// Opens the client for --protocol.
Result<std::unique_ptr<Client>> make_client(const std::string& protocol, const std::string& url,
                                            int concurrency) {
  if (protocol == "http") {
    kiln::client::HttpClientOptions options;
    options.async_threads = std::max(1, concurrency);
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<kiln::client::HttpClient> http,
                          kiln::client::HttpClient::create(url, options));
    return std::unique_ptr<Client>(std::move(http));
  }
  if (protocol == "grpc") {
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<kiln::client::GrpcClient> grpc,
                          kiln::client::GrpcClient::create(url));
    return std::unique_ptr<Client>(std::move(grpc));
  }
  return kiln::invalid_argument_error(
      fmt::format("--protocol: expected http or grpc, found \"{}\"", protocol));
}

int64_t micros_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() -
                                                               start)
      .count();
}

Status run(const std::string& protocol, const std::string& url, const std::string& model,
           const std::filesystem::path& dir, int concurrency, int timeout_s) {
  KILN_ASSIGN_OR_RETURN(std::vector<Image> images, read_images(dir));
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Client> client, make_client(protocol, url, concurrency));
  KILN_RETURN_IF_ERROR(client->wait_until_server_ready(std::chrono::seconds(timeout_s)));
  KILN_ASSIGN_OR_RETURN(kiln::client::ModelMetadata meta, client->model_metadata(model));
  if (meta.inputs.size() != 1) {
    return kiln::invalid_argument_error(fmt::format(
        "model \"{}\": expected one input (the image), found {}", model, meta.inputs.size()));
  }
  const std::string input = meta.inputs[0].name;
  const bool encoded = meta.inputs[0].dtype == kiln::DType::kString;
  fmt::print("model {} over {} at {}: input \"{}\" ({}), {} images from {}\n", model, protocol, url,
             input, encoded ? "PNG bytes" : "pixels", images.size(), dir.string());

  // One request per image, one after another: each latency is a full round trip.
  fmt::print("{:<16} {:>9} {:>10} {:>5} {:>11}\n", "image", "predicted", "confidence", "true",
             "latency_us");
  std::vector<int64_t> latencies;
  std::vector<int> predicted;
  int correct = 0;
  for (const Image& image : images) {
    const auto start = std::chrono::steady_clock::now();
    Result<kiln::client::InferenceResponse> response =
        client->model_infer(model, make_request(image, input, encoded));
    const int64_t us = micros_since(start);
    KILN_ASSIGN_OR_RETURN(Prediction p, predict(response, image.file));
    latencies.push_back(us);
    predicted.push_back(p.cls);
    correct += p.cls == image.label ? 1 : 0;
    fmt::print("{:<16} {:>9} {:>10.4f} {:>5} {:>11}{}\n", image.file, p.cls, p.confidence,
               image.label, us, p.cls == image.label ? "" : "  wrong");
  }
  std::vector<int64_t> sorted = latencies;
  std::sort(sorted.begin(), sorted.end());
  fmt::print("accuracy: {}/{} = {:.2f}%\n", correct, images.size(),
             100.0 * correct / static_cast<double>(images.size()));
  fmt::print("latency: p50 {} us, max {} us (one request at a time)\n", sorted[sorted.size() / 2],
             sorted.back());

  // Every image at once, `concurrency` in flight: the server's dynamic batcher joins them.
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::future<Result<kiln::client::InferenceResponse>>> futures;
  for (const Image& image : images) {
    futures.push_back(client->model_infer_async(model, make_request(image, input, encoded)));
  }
  int same = 0;
  for (size_t i = 0; i < images.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(Prediction p, predict(futures[i].get(), images[i].file));
    same += p.cls == predicted[i] ? 1 : 0;
  }
  fmt::print(
      "concurrent: {} async requests ({} in flight) in {} us, {}/{} predictions match the "
      "sequential ones\n",
      images.size(), concurrency, micros_since(start), same, images.size());
  if (same != static_cast<int>(images.size())) {
    return kiln::internal_error("concurrent predictions differ from the sequential ones");
  }
  return Status();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("classify_digits: classify held-out digit images with a model served by kiln");
  std::string url = "http://127.0.0.1:8000";
  std::string protocol = "http";
  std::string model = "digits";
  std::string images;
  int concurrency = 16;
  int timeout_s = 30;
  app.add_option("--url", url, "server address (http://host:port, or host:port for grpc)");
  app.add_option("--protocol", protocol, "http or grpc")->check(CLI::IsMember({"http", "grpc"}));
  app.add_option("--model", model, "model name in the repository");
  app.add_option("--images", images, "folder with labels.txt and the PGM images it names")
      ->required();
  app.add_option("--concurrency", concurrency, "async requests in flight")
      ->check(CLI::Range(1, 256));
  app.add_option("--timeout", timeout_s, "seconds to wait for the server to be ready");
  CLI11_PARSE(app, argc, argv);
  Status status = run(protocol, url, model, images, concurrency, timeout_s);
  if (!status.ok()) {
    fmt::print(stderr, "classify_digits: {}\n", status.to_string());
    return 1;
  }
  return 0;
}
