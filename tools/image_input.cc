// SPDX-License-Identifier: Apache-2.0
// Image files through a pipeline into a model input.
#include "tools/image_input.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>

#include "core/mapped_file.h"
#include "pipeline/executor/pipeline.h"
#include "pipeline/json/pipeline_json.h"

namespace kiln::tools {

bool is_image_file(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext == ".png" || ext == ".jpg" || ext == ".jpeg";
}

Result<Tensor> images_through_pipeline(const std::vector<std::string>& paths,
                                       const std::string& pipeline_json) {
  KILN_ASSIGN_OR_RETURN(pipeline::PipelineSpec spec, pipeline::load_pipeline_json(pipeline_json));
  if (spec.ops.empty() || spec.options.outputs.empty()) {
    return invalid_argument_error(
        fmt::format("pipeline \"{}\" has no operators or no outputs", pipeline_json));
  }
  pipeline::OpSpec& reader = spec.ops.front();
  if (reader.op != "readers.external_source") {
    reader.op = "readers.external_source";
    reader.args.clear();
  }
  std::erase(spec.options.outputs, "label");
  std::erase(spec.options.outputs, "labels");
  if (spec.options.outputs.empty()) {
    return invalid_argument_error(fmt::format(
        "pipeline \"{}\" returns only labels; list an image tensor in \"outputs\"", pipeline_json));
  }
  spec.options.batch_size = static_cast<int64_t>(paths.size());
  spec.options.bad_data = pipeline::BadDataPolicy::kError;
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<pipeline::Pipeline> p,
                        pipeline::Pipeline::create(spec.options, spec.ops));
  std::vector<Tensor> encoded;
  for (const std::string& path : paths) {
    KILN_ASSIGN_OR_RETURN(std::string bytes, read_file(path));
    Tensor t(DType::kU8, Shape({static_cast<int64_t>(bytes.size())}));
    std::memcpy(t.raw_data(), bytes.data(), bytes.size());
    encoded.push_back(std::move(t));
  }
  KILN_RETURN_IF_ERROR(p->feed(std::move(encoded), {}, paths));
  KILN_ASSIGN_OR_RETURN(std::optional<pipeline::Batch> batch, p->run());
  if (!batch || batch->outputs.empty() || batch->outputs[0].samples.size() != paths.size()) {
    return internal_error(fmt::format("pipeline \"{}\" returned no batch for {} image(s)",
                                      pipeline_json, paths.size()));
  }
  const pipeline::TensorList& list = batch->outputs[0];
  if (list.dense.defined()) return list.dense;
  return invalid_argument_error(fmt::format(
      "pipeline \"{}\" gives images of different shapes ({} and others); end it with a resize or "
      "crop to the model's input size",
      pipeline_json, list.samples[0].shape().to_string()));
}

}  // namespace kiln::tools
