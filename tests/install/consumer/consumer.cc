// SPDX-License-Identifier: Apache-2.0
// kiln_consumer: a program built outside kiln's tree against an installed kiln (find_package or
// pkg-config). It compiles the digit model and classifies the held-out digits with the compiler
// API, then serves the example repository in process and sends the same digits as PNG bytes
// through the chain (pipeline -> model) with the native client. Exits 1 unless both runs get at
// least 90% right and agree on every image.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "client/native_client.h"
#include "compiler/onnx/importer.h"
#include "compiler/targets/target.h"
#include "core/mapped_file.h"
#include "pipeline/json/pipeline_json.h"
#include "server/core/server.h"

namespace {

using kiln::Result;
using kiln::Status;

struct Digit {
  std::string file;
  int label = -1;
  kiln::Tensor pixels;  // [1, 1, 8, 8] FP32, grey level / maxval as the model was trained
  kiln::Tensor png;     // BYTES [1]: the same digit as a PNG file
};

// A binary PGM (P5) as grey level / maxval, [1, 1, h, w].
Result<kiln::Tensor> read_pgm(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::string magic;
  int width = 0, height = 0, maxval = 0;
  in >> magic >> width >> height >> maxval;
  if (!in || magic != "P5" || width <= 0 || height <= 0 || maxval <= 0 || maxval > 255) {
    return kiln::invalid_argument_error(
        fmt::format("{}: expected a binary PGM with grey levels up to 255", path.string()));
  }
  in.get();
  std::vector<unsigned char> bytes(static_cast<size_t>(width) * height);
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (in.gcount() != static_cast<std::streamsize>(bytes.size())) {
    return kiln::invalid_argument_error(fmt::format("{}: truncated pixels", path.string()));
  }
  std::vector<float> values(bytes.size());
  for (size_t i = 0; i < bytes.size(); ++i) values[i] = bytes[i] / static_cast<float>(maxval);
  return kiln::Tensor::from_vector<float>(std::span<const float>(values),
                                          kiln::Shape{1, 1, height, width});
}

// The digits `labels.txt` lists ("FILE LABEL" lines), as pixels and as PNG bytes.
Result<std::vector<Digit>> read_digits(const std::filesystem::path& dir) {
  std::ifstream in(dir / "labels.txt");
  if (!in)
    return kiln::not_found_error(fmt::format("{}/labels.txt cannot be opened", dir.string()));
  std::vector<Digit> digits;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    Digit d;
    if (!(fields >> d.file >> d.label)) {
      return kiln::invalid_argument_error(fmt::format("labels.txt: bad line \"{}\"", line));
    }
    KILN_ASSIGN_OR_RETURN(d.pixels, read_pgm(dir / d.file));
    KILN_ASSIGN_OR_RETURN(std::string bytes,
                          kiln::read_file((dir / d.file).replace_extension(".png").string()));
    d.png = kiln::Tensor(kiln::DType::kString, kiln::Shape{1});
    d.png.data<std::string>()[0] = std::move(bytes);
    digits.push_back(std::move(d));
  }
  if (digits.empty()) return kiln::invalid_argument_error("labels.txt names no digits");
  return digits;
}

int argmax(const kiln::Tensor& scores) {
  const float* v = scores.data<float>();
  return static_cast<int>(std::max_element(v, v + scores.shape().numel()) - v);
}

// The compiler API: import, compile for `target`, run each digit.
Result<std::vector<int>> classify_compiled(const std::string& model, const std::string& target,
                                           const std::vector<Digit>& digits) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<kiln::compiler::Model> imported,
                        kiln::compiler::import_onnx_file(model));
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<kiln::compiler::Target> t,
                        kiln::compiler::make_target(target));
  std::shared_ptr<kiln::compiler::Graph> graph = std::move(imported->graph);
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<kiln::compiler::Executable> exe,
                        kiln::compiler::compile(graph, *t));
  std::vector<int> classes;
  for (const Digit& d : digits) {
    KILN_ASSIGN_OR_RETURN(std::vector<kiln::compiler::Argument> out, exe->run({d.pixels}));
    classes.push_back(argmax(out.at(0).tensor()));
  }
  return classes;
}

// The server in process and the native client: PNG bytes through `model` (the chain).
Result<std::vector<int>> classify_served(const std::string& repository, const std::string& model,
                                         const std::vector<Digit>& digits) {
  kiln::server::ServerOptions options;
  options.repository = repository;
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<kiln::server::Server> server,
                        kiln::server::Server::create(options));
  kiln::client::NativeClient client(server.get());
  KILN_RETURN_IF_ERROR(client.wait_until_server_ready());
  std::vector<int> classes;
  for (const Digit& d : digits) {
    kiln::client::InferenceRequest request;
    request.inputs.push_back({"image_bytes", d.png, {}});
    Result<kiln::client::InferenceResponse> response = client.model_infer(model, request);
    if (!response.ok()) return response.status().with_context(d.file);
    if (response->outputs.empty()) return kiln::internal_error(d.file + ": no output");
    classes.push_back(argmax(response->outputs[0].data));
  }
  server->shutdown();
  return classes;
}

int correct(const std::vector<int>& classes, const std::vector<Digit>& digits) {
  int n = 0;
  for (size_t i = 0; i < digits.size(); ++i) n += classes[i] == digits[i].label ? 1 : 0;
  return n;
}

Status run(const std::string& examples) {
  KILN_ASSIGN_OR_RETURN(std::vector<Digit> digits, read_digits(examples + "/digit_images"));
  // The pipeline library: the chain's preprocessing parses here as it does in the server.
  KILN_ASSIGN_OR_RETURN(
      kiln::pipeline::PipelineSpec spec,
      kiln::pipeline::load_pipeline_json(examples + "/repository/digits_pipeline/1/pipeline.json"));
  fmt::print("pipeline digits_pipeline: {} operators ({} form)\n", spec.ops.size(), spec.format);

  const std::vector<std::string> targets = kiln::compiler::target_names();
  const std::string target =
      std::find(targets.begin(), targets.end(), "cpu") != targets.end() ? "cpu" : "ref";
  KILN_ASSIGN_OR_RETURN(
      std::vector<int> compiled,
      classify_compiled(examples + "/repository/digits/1/model.onnx", target, digits));
  KILN_ASSIGN_OR_RETURN(std::vector<int> served,
                        classify_served(examples + "/repository", "digits_chain", digits));
  for (size_t i = 0; i < digits.size(); ++i) {
    fmt::print("{:<16} label {} compiled {} served {}\n", digits[i].file, digits[i].label,
               compiled[i], served[i]);
  }
  const int total = static_cast<int>(digits.size());
  fmt::print("compiled on {}: {}/{} right; served through digits_chain: {}/{} right\n", target,
             correct(compiled, digits), total, correct(served, digits), total);
  if (correct(compiled, digits) * 10 < total * 9 || correct(served, digits) * 10 < total * 9) {
    return kiln::internal_error("fewer than 90% of the digits are right");
  }
  if (compiled != served) {
    return kiln::internal_error("the compiled model and the served chain disagree on a digit");
  }
  return Status();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    fmt::print(stderr, "usage: kiln_consumer PATH/TO/examples\n");
    return 2;
  }
  Status status = run(argv[1]);
  if (!status.ok()) {
    fmt::print(stderr, "kiln_consumer: {}\n", status.message());
    return 1;
  }
  fmt::print("kiln_consumer: ok\n");
  return 0;
}
