// SPDX-License-Identifier: Apache-2.0
// The pipeline backend: every request's BYTES input holds encoded images; one pipeline run
// processes the images of a whole batch of requests and each request gets its own rows back.
#include "server/backends/pipeline_backend.h"

#include <fmt/format.h>

#include <condition_variable>
#include <cstring>
#include <mutex>

#include "core/logging.h"
#include "pipeline/json/pipeline_json.h"

namespace kiln::server {

namespace {

using pipeline::Pipeline;

// Two small solid-colour RGB PNGs of different sizes (48x40 and 40x56): the load runs them
// through the pipeline to learn its outputs' dtypes and which dims depend on the image size.
constexpr uint8_t kProbeA[] = {
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x30, 0x00, 0x00, 0x00, 0x28, 0x08, 0x02, 0x00, 0x00, 0x00, 0x37, 0xe5, 0xee,
    0x26, 0x00, 0x00, 0x00, 0x35, 0x49, 0x44, 0x41, 0x54, 0x78, 0xda, 0xed, 0xce, 0x01, 0x09, 0x00,
    0x00, 0x08, 0x03, 0xb0, 0xb7, 0xb2, 0x90, 0x61, 0x8d, 0x65, 0x0d, 0xc1, 0xc1, 0x02, 0x2c, 0xd3,
    0x75, 0x4a, 0x84, 0x84, 0x84, 0x84, 0x84, 0x84, 0x84, 0x84, 0x84, 0x84, 0x84, 0x84, 0x84, 0x84,
    0x84, 0x84, 0x84, 0x84, 0x84, 0x84, 0x84, 0x3e, 0x85, 0x16, 0x60, 0x0c, 0x67, 0x17, 0xde, 0x05,
    0x7e, 0x96, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82};
constexpr uint8_t kProbeB[] = {
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x28, 0x00, 0x00, 0x00, 0x38, 0x08, 0x02, 0x00, 0x00, 0x00, 0x00, 0x4a, 0x2d,
    0xa1, 0x00, 0x00, 0x00, 0x36, 0x49, 0x44, 0x41, 0x54, 0x78, 0xda, 0xed, 0xcd, 0x41, 0x09, 0x00,
    0x00, 0x08, 0x04, 0xb0, 0x6b, 0x65, 0x21, 0xc3, 0x1a, 0xcb, 0x18, 0x82, 0x0c, 0xf6, 0x5f, 0xa6,
    0xeb, 0x44, 0xc4, 0x62, 0xb1, 0x58, 0x2c, 0x16, 0x8b, 0xc5, 0x62, 0xb1, 0x58, 0x2c, 0x16, 0x8b,
    0xc5, 0x62, 0xb1, 0x58, 0x2c, 0x16, 0x8b, 0xc5, 0x9f, 0xe2, 0x05, 0xbf, 0xc5, 0x22, 0xf5, 0x1d,
    0x7c, 0xe7, 0x0d, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82};

Tensor probe_image(std::span<const uint8_t> png) {
  return Tensor::wrap(DType::kU8, Shape{static_cast<int64_t>(png.size())},
                      const_cast<uint8_t*>(png.data()), nullptr);
}

// The outputs of every image fed, in feeding order (one tensor per pipeline output), or the
// first image's error. Leaves nothing queued in the pipeline.
Result<std::vector<std::vector<Tensor>>> run_images(Pipeline& p, std::vector<Tensor> encoded,
                                                    std::vector<std::string> names) {
  const size_t count = encoded.size();
  KILN_RETURN_IF_ERROR(p.feed(std::move(encoded), {}, std::move(names)));
  std::vector<std::vector<Tensor>> samples;
  samples.reserve(count);
  while (samples.size() < count) {
    Result<std::optional<pipeline::Batch>> batch = p.run();
    if (!batch.ok() || !*batch) {
      while (p.pending() > 0) p.run().status().ignore_error();
      if (!batch.ok()) return batch.status();
      return internal_error(
          fmt::format("the pipeline returned {} of {} images", samples.size(), count));
    }
    const std::vector<pipeline::TensorList>& outputs = (*batch)->outputs;
    for (size_t i = 0; i < outputs[0].samples.size(); ++i) {
      std::vector<Tensor> sample;
      for (const pipeline::TensorList& o : outputs) sample.push_back(o.samples[i]);
      samples.push_back(std::move(sample));
    }
  }
  return samples;
}

// Stacks the per-image tensors of one request's output into [n, sample dims...].
Result<Tensor> stack(std::span<const Tensor> images, const std::string& output) {
  const Tensor& first = images[0];
  std::vector<int64_t> dims{static_cast<int64_t>(images.size())};
  for (int64_t d : first.shape().dims()) dims.push_back(d);
  if (images.size() == 1) return first.reshaped(Shape(dims));
  for (const Tensor& t : images) {
    if (t.dtype() != first.dtype() || t.shape() != first.shape()) {
      return invalid_argument_error(fmt::format(
          "output \"{}\": the request's images give different shapes ({} and {}); send them in "
          "separate requests, or resize them to one size in the pipeline",
          output, dims_to_string(first.shape().dims()), dims_to_string(t.shape().dims())));
    }
  }
  KILN_ASSIGN_OR_RETURN(Tensor out, Tensor::allocate(first.dtype(), Shape(dims)));
  char* dst = static_cast<char*>(out.raw_data());
  for (const Tensor& t : images) {
    std::memcpy(dst, t.raw_data(), t.nbytes());
    dst += t.nbytes();
  }
  return out;
}

class PipelineBackend final : public Backend {
 public:
  Result<BackendInfo> load(const BackendContext& ctx) override {
    const std::string& model = ctx.config.name;
    const Parameters& p = ctx.config.parameters;
    KILN_ASSIGN_OR_RETURN(std::filesystem::path path, find_model_file(ctx, ".json"));
    KILN_ASSIGN_OR_RETURN(pipeline::PipelineSpec spec, pipeline::load_pipeline_json(path.string()));
    KILN_RETURN_IF_ERROR(adapt(spec, p, path));

    KILN_ASSIGN_OR_RETURN(std::optional<int64_t> batch, p.get_int("batch"));
    KILN_ASSIGN_OR_RETURN(std::optional<int64_t> batch_size, p.get_int("batch_size"));
    if (!batch) batch = batch_size;
    const int64_t max_batch = ctx.config.batching.max_batch_size;
    spec.options.batch_size = batch.value_or(max_batch > 0 ? max_batch : 64);
    if (spec.options.batch_size < 1) {
      return invalid_argument_error(
          fmt::format("model \"{}\": parameter \"batch\" must be at "
                      "least 1, got {}",
                      model, spec.options.batch_size));
    }
    KILN_ASSIGN_OR_RETURN(std::optional<int64_t> threads, p.get_int("threads"));
    if (threads) spec.options.num_threads = static_cast<int>(*threads);
    // A bad image fails its own request (execute() retries the others), never shifts results.
    spec.options.bad_data = pipeline::BadDataPolicy::kError;
    spec.options.prefetch_queue_depth = 1;
    for (int64_t i = 0; i < ctx.config.instances; ++i) {
      KILN_ASSIGN_OR_RETURN(std::unique_ptr<Pipeline> pipe,
                            Pipeline::create(spec.options, spec.ops));
      free_.push_back(std::move(pipe));
    }

    BackendInfo info;
    info.platform = "kiln_pipeline";
    info.max_batch_size = spec.options.batch_size;
    std::string input = "image";
    if (!ctx.config.inputs.empty()) {
      const TensorMetadata& declared = ctx.config.inputs[0];
      if (ctx.config.inputs.size() != 1 || declared.dtype != DType::kString) {
        return invalid_argument_error(fmt::format(
            "model \"{}\": a pipeline model takes one BYTES input (encoded images); the config "
            "declares {} input(s), the first of datatype {}",
            model, ctx.config.inputs.size(), wire_dtype_name(declared.dtype)));
      }
      input = declared.name;
    }
    input_ = input;
    info.inputs = {{input, DType::kString, {-1}}};
    // The parser names tensors "images@2" (the latest "images"); clients see "images".
    for (const std::string& internal : spec.options.outputs) {
      std::string name = internal.substr(0, internal.find('@'));
      const bool taken =
          std::find(output_names_.begin(), output_names_.end(), name) != output_names_.end();
      output_names_.push_back(taken ? internal : name);
    }
    KILN_ASSIGN_OR_RETURN(info.outputs, output_metadata(ctx, output_names_));
    log(LogLevel::kInfo, "model \"{}\": pipeline {} ({} form), batch {}, outputs {}", model,
        path.string(), spec.format, spec.options.batch_size, fmt::join(output_names_, ", "));
    return info;
  }

  std::vector<Result<std::vector<InferTensor>>> execute(
      std::span<const InferenceRequest* const> batch) override {
    std::unique_ptr<Pipeline> pipe = acquire();
    std::vector<Result<std::vector<InferTensor>>> out;
    // One run for the whole batch; when an image fails, each request runs alone so the others
    // still get their results and the bad one its own error.
    Result<std::vector<std::vector<Tensor>>> all = run_requests(*pipe, batch);
    size_t next = 0;
    for (size_t r = 0; r < batch.size(); ++r) {
      const InferenceRequest* request = batch[r];
      const size_t n = static_cast<size_t>(request->inputs[0].data.numel());
      if (all.ok()) {
        out.push_back(assemble(std::span(*all).subspan(next, n)));
        next += n;
        continue;
      }
      Result<std::vector<std::vector<Tensor>>> one = run_requests(*pipe, std::span(&request, 1));
      if (!one.ok()) {
        // The decoders call a corrupt or truncated image data loss; here the image is what the
        // client sent, so it is the client's error (400), not the server's (500).
        const Status& s = one.status();
        out.push_back(s.code() == StatusCode::kDataLoss
                          ? invalid_argument_error(std::string(s.message()))
                          : s);
      } else {
        out.push_back(assemble(*one));
      }
    }
    release(std::move(pipe));
    return out;
  }

 private:
  // Makes a served pipeline of a training one: the caller feeds the images (a file or TFRecord
  // reader becomes readers.external_source) and there are no labels to return.
  static Status adapt(pipeline::PipelineSpec& spec, const Parameters& p,
                      const std::filesystem::path& path) {
    pipeline::OpSpec& reader = spec.ops[0];
    if (reader.op != "readers.external_source") {
      reader.op = "readers.external_source";
      reader.args.clear();
    }
    std::erase(spec.options.outputs, "label");
    if (spec.options.outputs.empty()) {
      return invalid_argument_error(
          fmt::format("pipeline {}: it returns only labels; list an image tensor in \"outputs\"",
                      path.string()));
    }
    // amdinfer's rocAL worker parameter: the decoded colour format.
    KILN_ASSIGN_OR_RETURN(std::optional<std::string> color, p.get_string("color_format"));
    if (color) {
      std::string type = *color == "RGB24"   ? "RGB"
                         : *color == "BGR24" ? "BGR"
                         : *color == "U8"    ? "GRAY"
                                             : "";
      if (type.empty()) {
        return invalid_argument_error(fmt::format(
            "parameter \"color_format\" must be RGB24, BGR24 or U8, got \"{}\"", *color));
      }
      for (pipeline::OpSpec& op : spec.ops) {
        if (op.op == "decoders.image") op.args["output_type"] = type;
      }
    }
    return Status();
  }

  // Declared [[outputs]] when the config has them; otherwise what two probe images of different
  // sizes give (a dim that differs between them is -1).
  Result<std::vector<TensorMetadata>> output_metadata(const BackendContext& ctx,
                                                      const std::vector<std::string>& names) {
    if (!ctx.config.outputs.empty()) {
      for (const TensorMetadata& t : ctx.config.outputs) {
        if (std::find(names.begin(), names.end(), t.name) == names.end()) {
          return invalid_argument_error(
              fmt::format("model \"{}\": declared output \"{}\" is not one the pipeline returns "
                          "({})",
                          ctx.config.name, t.name, fmt::join(names, ", ")));
        }
      }
      return ctx.config.outputs;
    }
    Result<std::vector<std::vector<Tensor>>> probe =
        run_images(*free_[0], {probe_image(kProbeA), probe_image(kProbeB)}, {"probe A", "probe B"});
    if (!probe.ok()) {
      return probe.status().with_context(fmt::format(
          "model \"{}\": running two probe images through the pipeline to learn its outputs "
          "failed; declare the outputs with [[outputs]] in the model's config",
          ctx.config.name));
    }
    std::vector<TensorMetadata> out;
    for (size_t o = 0; o < names.size(); ++o) {
      const Tensor& a = (*probe)[0][o];
      const Tensor& b = (*probe)[1][o];
      TensorMetadata t{names[o], a.dtype(), {-1}};
      for (int i = 0; i < a.rank(); ++i) {
        const int64_t d = a.shape()[i];
        t.shape.push_back(b.rank() == a.rank() && b.shape()[i] == d ? d : -1);
      }
      out.push_back(std::move(t));
    }
    return out;
  }

  Result<std::vector<std::vector<Tensor>>> run_requests(
      Pipeline& pipe, std::span<const InferenceRequest* const> requests) const {
    std::vector<Tensor> encoded;
    std::vector<std::string> names;
    for (const InferenceRequest* r : requests) {
      const Tensor& bytes = r->inputs[0].data;
      // The request's tensor keeps the bytes alive; no copy.
      auto owner = std::make_shared<Tensor>(bytes);
      for (int64_t i = 0; i < bytes.numel(); ++i) {
        const std::string& image = bytes.data<std::string>()[i];
        encoded.push_back(Tensor::wrap(DType::kU8, Shape{static_cast<int64_t>(image.size())},
                                       const_cast<char*>(image.data()), owner));
        names.push_back(fmt::format("request \"{}\" image {}", r->id, i));
      }
    }
    return run_images(pipe, std::move(encoded), std::move(names));
  }

  Result<std::vector<InferTensor>> assemble(std::span<const std::vector<Tensor>> images) const {
    std::vector<InferTensor> out;
    for (size_t o = 0; o < output_names_.size(); ++o) {
      std::vector<Tensor> column;
      for (const std::vector<Tensor>& image : images) column.push_back(image[o]);
      KILN_ASSIGN_OR_RETURN(Tensor t, stack(column, output_names_[o]));
      out.push_back({output_names_[o], std::move(t), {}});
    }
    return out;
  }

  std::unique_ptr<Pipeline> acquire() {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [this] { return !free_.empty(); });
    std::unique_ptr<Pipeline> p = std::move(free_.back());
    free_.pop_back();
    return p;
  }

  void release(std::unique_ptr<Pipeline> p) {
    {
      std::lock_guard lock(mutex_);
      free_.push_back(std::move(p));
    }
    cv_.notify_one();
  }

  std::string input_;
  std::vector<std::string> output_names_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Pipeline>> free_;  // one per instance
};

}  // namespace

std::unique_ptr<Backend> make_pipeline_backend() {
  return std::make_unique<PipelineBackend>();
}

}  // namespace kiln::server
