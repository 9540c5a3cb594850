// SPDX-License-Identifier: Apache-2.0
// The executor: graph wiring, the producer thread, per-sample processing, batching, bad data.
#include "pipeline/executor/pipeline.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>

#include "core/logging.h"
#include "pipeline/operators/readers_file.h"
#include "pipeline/readers/tfrecord.h"

namespace kiln::pipeline {
namespace {

using Clock = std::chrono::steady_clock;

// GPU stage threads, a stream each: one decodes and transforms a batch while another finishes
// the previous one and a third waits with the next.
constexpr int kGpuStages = 3;

int64_t nanos_since(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count();
}

Result<double> scalar_value(const Tensor& t, std::string_view op, std::string_view arg) {
  if (t.numel() != 1) {
    return invalid_argument_error(fmt::format(
        "operator {}: per-sample argument \"{}\" expects one value per sample, got shape {}", op,
        arg, t.shape().to_string()));
  }
  switch (t.dtype()) {
    case DType::kF32: return static_cast<double>(*t.data<float>());
    case DType::kF64: return *t.data<double>();
    case DType::kI32: return static_cast<double>(*t.data<int32_t>());
    case DType::kI64: return static_cast<double>(*t.data<int64_t>());
    case DType::kU8: return static_cast<double>(*t.data<uint8_t>());
    case DType::kBool: return *t.data<bool>() ? 1.0 : 0.0;
    default:
      return invalid_argument_error(
          fmt::format("operator {}: per-sample argument \"{}\" cannot take a {} value", op, arg,
                      dtype_name(t.dtype())));
  }
}

}  // namespace

Pipeline::Pipeline(const PipelineOptions& options, std::optional<FileReader> reader)
    : options_(options),
      reader_(std::move(reader)),
      // The thread that calls process_all (the producer, or run()'s caller) is a runner too.
      pool_(std::max(options.num_threads - 1, 1)),
      buffers_(kernels::BufferPool::create(
          static_cast<size_t>(std::max<int64_t>(options.prefetch_queue_depth, 1)) * 4 + 4)),
      queue_(static_cast<size_t>(options.prefetch_queue_depth)) {}

Result<std::unique_ptr<Pipeline>> Pipeline::create(const PipelineOptions& options,
                                                   std::vector<OpSpec> ops) {
  if (options.batch_size < 1 || options.num_threads < 0 || options.prefetch_queue_depth < 1) {
    return invalid_argument_error(fmt::format(
        "pipeline: batch_size {} and prefetch_queue_depth {} must be >= 1, num_threads {} >= 0",
        options.batch_size, options.prefetch_queue_depth, options.num_threads));
  }
  if (options.outputs.empty()) return invalid_argument_error("pipeline: no outputs requested");
  if (ops.empty()) return invalid_argument_error("pipeline: no operators");

  std::vector<Node> nodes;
  std::map<std::string, int, std::less<>> slots;
  std::vector<bool> on_gpu;  // per slot
  std::vector<std::string> stages;
  for (size_t i = 0; i < ops.size(); ++i) {
    OpSpec& spec = ops[i];
    const std::string where = fmt::format("pipeline operator #{} ({})", i, spec.op);
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<Operator> op, create_operator(spec.op, spec.args));
    const OperatorSchema& schema = op->schema();
    if (op->is_reader() != (i == 0)) {
      return invalid_argument_error(
          fmt::format("{}: the first operator, and only it, must be a reader", where));
    }
    if (spec.inputs.size() != schema.inputs.size()) {
      return invalid_argument_error(fmt::format("{}: expected {} inputs, got {}", where,
                                                schema.inputs.size(), spec.inputs.size()));
    }
    if (spec.outputs.empty()) spec.outputs = schema.outputs;
    if (spec.outputs.size() != schema.outputs.size()) {
      return invalid_argument_error(fmt::format("{}: expected {} output names, got {}", where,
                                                schema.outputs.size(), spec.outputs.size()));
    }
    Node node;
    node.gpu = spec.gpu;
    if (spec.gpu && !op->supports_gpu()) {
      return invalid_argument_error(fmt::format("{}: has no GPU form; device \"gpu\" takes {}",
                                                where, fmt::join(gpu_operator_names(), ", ")));
    }
    for (const std::string& name : spec.inputs) {
      auto it = slots.find(name);
      if (it == slots.end()) {
        return invalid_argument_error(
            fmt::format("{}: input \"{}\" is not an output of an earlier operator", where, name));
      }
      if (on_gpu[static_cast<size_t>(it->second)] && !spec.gpu) {
        return invalid_argument_error(fmt::format(
            "{}: input \"{}\" is made on the GPU, so this operator needs device \"gpu\" too "
            "(or the earlier operators device \"cpu\")",
            where, name));
      }
      node.inputs.push_back(it->second);
    }
    for (const auto& [arg, name] : spec.arg_inputs) {
      const ArgSpec* arg_spec = schema.find_arg(arg);
      if (arg_spec == nullptr || !arg_spec->per_sample) {
        return invalid_argument_error(
            fmt::format("{}: \"{}\" is not a per-sample argument", where, arg));
      }
      auto it = slots.find(name);
      if (it == slots.end()) {
        return invalid_argument_error(fmt::format(
            "{}: argument input \"{}\" is not an output of an earlier operator", where, name));
      }
      if (on_gpu[static_cast<size_t>(it->second)]) {
        return invalid_argument_error(fmt::format(
            "{}: argument input \"{}\" is made on the GPU; per-sample arguments come from CPU "
            "operators",
            where, name));
      }
      node.arg_slots.emplace_back(arg, it->second);
    }
    for (const std::string& name : spec.outputs) {
      int slot = static_cast<int>(slots.size());
      if (!slots.emplace(name, slot).second) {
        return invalid_argument_error(
            fmt::format("{}: tensor name \"{}\" is already used", where, name));
      }
      node.outputs.push_back(slot);
      on_gpu.push_back(spec.gpu);
    }
    stages.push_back(i == 0 ? std::string("read") : fmt::format("{}#{}", spec.op, i));
    node.op = std::move(op);
    nodes.push_back(std::move(node));
  }
  stages.push_back("batch");

  std::optional<FileReader> reader;
  FileReaderOptions reader_options;
  const std::string& reader_name = nodes[0].op->schema().name;
  if (reader_name == "readers.file") {
    KILN_ASSIGN_OR_RETURN(reader_options, file_reader_options(nodes[0].op->args(), options.seed));
  } else if (reader_name == "readers.tfrecord") {
    KILN_ASSIGN_OR_RETURN(reader_options,
                          tfrecord_reader_options(nodes[0].op->args(), options.seed));
  }
  std::vector<CocoImage> coco_images;
  if (reader_name == "readers.coco") {
    KILN_ASSIGN_OR_RETURN(reader_options, coco_reader_options(nodes[0].op->args(), options.seed));
    KILN_ASSIGN_OR_RETURN(CocoSet set, read_coco(coco_options(nodes[0].op->args())));
    KILN_ASSIGN_OR_RETURN(reader, FileReader::from_entries(std::move(set.entries), reader_options));
    coco_images = std::move(set.images);
  } else if (reader_name != "readers.external_source") {
    KILN_ASSIGN_OR_RETURN(reader, FileReader::open(reader_options));
  }
  PipelineOptions resolved = options;
  if (resolved.num_threads == 0) resolved.num_threads = default_thread_count();
  std::unique_ptr<Pipeline> p(new Pipeline(resolved, std::move(reader)));
  for (const std::string& name : options.outputs) {
    auto it = slots.find(name);
    if (it == slots.end()) {
      return invalid_argument_error(fmt::format("pipeline: output \"{}\" is not produced", name));
    }
    p->output_slots_.push_back(it->second);
  }
  p->last_batch_policy_ = reader_options.last_batch_policy;
  if (reader_name == "readers.tfrecord") {
    p->tfrecord_encoded_key_ = nodes[0].op->args().get_string("encoded_key");
    p->tfrecord_label_key_ = nodes[0].op->args().get_string("label_key");
  }
  p->coco_images_ = std::move(coco_images);
  p->num_slots_ = static_cast<int>(slots.size());
  for (size_t n = 0; n < nodes.size(); ++n) {
    if (!nodes[n].gpu) continue;
    p->gpu_nodes_.push_back(n);
    for (int slot : nodes[n].inputs) {
      if (!on_gpu[static_cast<size_t>(slot)] &&
          std::find(p->gpu_input_slots_.begin(), p->gpu_input_slots_.end(), slot) ==
              p->gpu_input_slots_.end()) {
        p->gpu_input_slots_.push_back(slot);
      }
    }
  }
  if (!p->gpu_nodes_.empty()) {
    for (int k = 0; k < kGpuStages; ++k) {
      KILN_ASSIGN_OR_RETURN(std::unique_ptr<kernels::GpuStream> stream,
                            kernels::GpuStream::create());
      stream->set_copy_pool(&p->pool_);
      p->gpu_.push_back(std::move(stream));
    }
  }
  p->slot_on_gpu_ = std::move(on_gpu);
  p->nodes_ = std::move(nodes);
  p->stage_names_ = std::move(stages);
  p->counters_ = std::make_unique<Counter[]>(p->stage_names_.size());
  p->start();
  return p;
}

Pipeline::~Pipeline() {
  stop();
}

void Pipeline::start() {
  stopping_ = false;
  epoch_done_ = false;
  failed_.reset();
  if (!reader_) return;  // external_source: run() does the work
  queue_.reopen();
  if (!gpu_.empty()) {
    gpu_queue_.reopen();
    gpu_seq_ = 0;
    next_out_ = 0;
    for (auto& stream : gpu_) {
      gpu_stages_.emplace_back([this, s = stream.get()] { run_gpu_stage(*s); });
    }
  }
  producer_ = std::thread([this, epoch = epoch_] { produce(epoch); });
}

void Pipeline::stop() {
  stopping_ = true;
  queue_.close();
  gpu_queue_.close();
  {
    std::lock_guard lock(turn_mutex_);
    turn_.notify_all();
  }
  if (producer_.joinable()) producer_.join();
  for (std::thread& t : gpu_stages_) t.join();
  gpu_stages_.clear();
}

void Pipeline::run_gpu_stage(kernels::GpuStream& stream) {
  while (std::optional<GpuItem> item = gpu_queue_.pop()) {
    Item out = EndOfEpoch{};
    if (auto* pending = std::get_if<Pending>(&item->what)) {
      Result<Batch> batch = assemble(&stream, pending->epoch, std::move(pending->samples),
                                     std::move(pending->paths), pending->num_padded);
      if (batch.ok()) {
        batch->position = pending->position;
        out = std::move(*batch);
      } else {
        out = batch.status();
      }
    } else if (auto* status = std::get_if<Status>(&item->what)) {
      out = *status;
    }
    {
      std::unique_lock lock(turn_mutex_);
      turn_.wait(lock, [&] { return next_out_ == item->seq || stopping_; });
      if (stopping_) return;
    }
    const bool last = !std::holds_alternative<Batch>(out);
    const bool pushed = queue_.push(std::move(out));
    {
      std::lock_guard lock(turn_mutex_);
      ++next_out_;
      turn_.notify_all();
    }
    if (!pushed || last) {
      gpu_queue_.close();  // the other stage threads stop waiting for work
      return;
    }
  }
}

void Pipeline::reset() {
  stop();
  if (reader_) {
    reader_->reset();
    epoch_ = reader_->epoch();
    consumed_ = reader_->position();
  } else {
    ++epoch_;
  }
  start();
}

Status Pipeline::restore(const ReaderPosition& position) {
  if (!reader_) {
    return failed_precondition_error(
        "pipeline: an external_source pipeline has no reader position to restore");
  }
  stop();
  Status status = reader_->restore(position);
  if (status.ok()) {
    consumed_ = position;
  } else {
    reader_->restore(consumed_).ignore_error();  // valid: it came from this reader
  }
  epoch_ = reader_->epoch();
  start();
  return status;
}

Status Pipeline::feed(std::vector<Tensor> encoded, std::vector<int32_t> labels,
                      std::vector<std::string> names) {
  if (reader_) {
    return failed_precondition_error(
        "pipeline: feed() needs a readers.external_source pipeline; this one reads files");
  }
  if ((!labels.empty() && labels.size() != encoded.size()) ||
      (!names.empty() && names.size() != encoded.size())) {
    return invalid_argument_error(
        fmt::format("pipeline: feed() got {} images, {} labels and {} names: expected as many "
                    "labels and names as images (or none)",
                    encoded.size(), labels.size(), names.size()));
  }
  for (size_t i = 0; i < encoded.size(); ++i) {
    if (!encoded[i].defined() || encoded[i].dtype() != DType::kU8 || encoded[i].rank() != 1) {
      return invalid_argument_error(fmt::format(
          "pipeline: fed image #{} must be a 1-D uint8 tensor of encoded bytes, got {} {}", i,
          dtype_name(encoded[i].dtype()), encoded[i].shape().to_string()));
    }
  }
  for (size_t i = 0; i < encoded.size(); ++i) {
    SampleInput in;
    in.encoded = std::move(encoded[i]);
    in.label = labels.empty() ? 0 : labels[i];
    in.path = names.empty() ? fmt::format("external #{}", fed_count_) : std::move(names[i]);
    in.position = fed_count_++;
    fed_.push_back(std::move(in));
  }
  return Status();
}

Result<std::optional<Batch>> Pipeline::run_external() {
  std::vector<SampleInput> samples;
  while (!fed_.empty() && static_cast<int64_t>(samples.size()) < options_.batch_size) {
    samples.push_back(std::move(fed_.front()));
    fed_.pop_front();
  }
  if (samples.empty()) return std::optional<Batch>();
  std::vector<Result<Sample>> results = process_all(samples, epoch_);
  std::vector<Sample> good;
  std::vector<std::string> paths;
  for (size_t i = 0; i < samples.size(); ++i) {
    if (results[i].ok()) {
      good.push_back(std::move(results[i]).value());
      paths.push_back(samples[i].path);
      continue;
    }
    if (options_.bad_data == BadDataPolicy::kError) return results[i].status();
    log(LogLevel::kWarning, "pipeline: skipping sample \"{}\": {}", samples[i].path,
        results[i].status().message());
    std::lock_guard lock(bad_mutex_);
    bad_samples_.push_back({epoch_, samples[i].path, std::string(results[i].status().message())});
  }
  if (good.empty()) return run_external();  // every sample was bad: try the next ones
  KILN_ASSIGN_OR_RETURN(Batch batch, assemble(gpu_.empty() ? nullptr : gpu_[0].get(), epoch_,
                                              std::move(good), std::move(paths), 0));
  return std::optional<Batch>(std::move(batch));
}

Result<std::optional<Batch>> Pipeline::run() {
  if (!reader_) return run_external();
  if (failed_) return *failed_;
  if (epoch_done_) return std::optional<Batch>();
  std::optional<Item> item = queue_.pop();
  if (!item || std::holds_alternative<EndOfEpoch>(*item)) {
    epoch_done_ = true;
    return std::optional<Batch>();
  }
  if (auto* status = std::get_if<Status>(&*item)) {
    failed_ = *status;
    return *status;
  }
  consumed_ = std::get<Batch>(*item).position;
  return std::optional<Batch>(std::move(std::get<Batch>(*item)));
}

std::vector<BadSample> Pipeline::bad_samples() const {
  std::lock_guard lock(bad_mutex_);
  return bad_samples_;
}

std::vector<StageTiming> Pipeline::stage_timings() const {
  std::vector<StageTiming> out;
  for (size_t i = 0; i < stage_names_.size(); ++i) {
    out.push_back({stage_names_[i], counters_[i].calls.load(),
                   static_cast<double>(counters_[i].nanos.load()) * 1e-9});
  }
  return out;
}

Pipeline::SampleInput Pipeline::file_sample(const SampleRef& ref) const {
  const FileEntry& entry = reader_->entries()[static_cast<size_t>(ref.entry)];
  if (entry.offset < 0) {
    return {Tensor(), entry.label, entry.path, ref.position, {}, -1, 0, ref.entry};
  }
  // Records of one TFRecord file are named file@offset in batches and messages.
  return {Tensor(),     entry.label, fmt::format("{}@{}", entry.path, entry.offset),
          ref.position, entry.path,  entry.offset,
          entry.size,   ref.entry};
}

Status Pipeline::read_sample(const SampleInput& sample, std::vector<Tensor>* slots) const {
  const std::vector<int>& out = nodes_[0].outputs;
  Tensor& encoded = (*slots)[static_cast<size_t>(out[0])];
  if (sample.encoded.defined()) {
    encoded = sample.encoded;
    (*slots)[static_cast<size_t>(out[1])] = Tensor::scalar(sample.label);
    return Status();
  }
  const std::string& file = sample.file.empty() ? sample.path : sample.file;
  KILN_ASSIGN_OR_RETURN(Tensor bytes, read_encoded(file, sample.offset, sample.size));
  if (!coco_images_.empty()) {
    // readers.coco: encoded, bboxes [N, 4] float32, labels [N] int32, image_ids [1] int32.
    const CocoImage& image = coco_images_[static_cast<size_t>(sample.entry)];
    const auto n = static_cast<int64_t>(image.labels.size());
    Tensor boxes(DType::kF32, Shape{n, 4});
    Tensor labels(DType::kI32, Shape{n});
    if (n > 0) {
      std::memcpy(boxes.raw_data(), image.boxes.data(), image.boxes.size() * sizeof(float));
      std::memcpy(labels.raw_data(), image.labels.data(), image.labels.size() * sizeof(int32_t));
    }
    Tensor id(DType::kI32, Shape{1});
    *id.data<int32_t>() = image.image_id;
    encoded = std::move(bytes);
    (*slots)[static_cast<size_t>(out[1])] = std::move(boxes);
    (*slots)[static_cast<size_t>(out[2])] = std::move(labels);
    (*slots)[static_cast<size_t>(out[3])] = std::move(id);
    return Status();
  }
  Tensor& label = (*slots)[static_cast<size_t>(out[1])];
  if (sample.offset < 0) {
    encoded = std::move(bytes);
    label = Tensor::scalar(sample.label);
    return Status();
  }
  KILN_ASSIGN_OR_RETURN(
      TfExample example,
      parse_tfrecord_example(bytes.span<uint8_t>(), tfrecord_encoded_key_, tfrecord_label_key_,
                             fmt::format("\"{}\"", sample.path)));
  auto owner = std::make_shared<Tensor>(bytes);
  encoded = Tensor::wrap(DType::kU8, Shape{static_cast<int64_t>(example.encoded.size())},
                         const_cast<uint8_t*>(example.encoded.data()), std::move(owner));
  label = Tensor::scalar(static_cast<int32_t>(example.label));
  return Status();
}

Result<Pipeline::Sample> Pipeline::process(const SampleInput& sample, int64_t epoch) {
  std::vector<Tensor> slots(static_cast<size_t>(num_slots_));
  auto start = Clock::now();
  KILN_RETURN_IF_ERROR(read_sample(sample, &slots));
  counters_[0].calls++;
  counters_[0].nanos += nanos_since(start);

  Sample result;
  // What GPU operators will make, per slot: planned here, made batch by batch in run_gpu().
  std::vector<std::pair<Shape, DType>> gpu_made(gpu_nodes_.empty() ? 0 : slots.size());
  std::vector<Tensor> inputs;
  std::vector<Tensor> outputs;
  for (size_t n = 1; n < nodes_.size(); ++n) {
    const Node& node = nodes_[n];
    start = Clock::now();
    SampleContext ctx;
    ctx.seed = mix_seed(
        {options_.seed, static_cast<uint64_t>(epoch), static_cast<uint64_t>(sample.position), n});
    ctx.path = sample.path;
    const OpArgs* args = &node.op->args();
    std::optional<OpArgs> sample_args;
    if (!node.arg_slots.empty()) {
      sample_args = node.op->args();
      for (const auto& [arg, slot] : node.arg_slots) {
        KILN_ASSIGN_OR_RETURN(double v, scalar_value(slots[slot], node.op->schema().name, arg));
        sample_args->set_sample_value(arg, v);
      }
      args = &*sample_args;
    }
    Status status;
    if (node.gpu) {
      const auto in = static_cast<size_t>(node.inputs[0]);
      const auto [shape, dtype] =
          slot_on_gpu_[in] ? gpu_made[in] : std::pair(slots[in].shape(), slots[in].dtype());
      Result<GpuSamplePlan> plan =
          node.op->plan_gpu(ctx, *args, shape, dtype, slot_on_gpu_[in] ? nullptr : &slots[in]);
      status = plan.status();
      if (plan.ok()) {
        gpu_made[static_cast<size_t>(node.outputs[0])] = {plan->out_shape, plan->out_dtype};
        result.steps.push_back(plan->step);
      }
    } else {
      inputs.clear();
      outputs.clear();
      for (int slot : node.inputs) inputs.push_back(slots[slot]);
      status = node.op->run(ctx, *args, inputs, &outputs);
      if (status.ok()) {
        KILN_CHECK(outputs.size() == node.outputs.size(),
                   "operator returned the wrong output count");
        for (size_t k = 0; k < outputs.size(); ++k) slots[node.outputs[k]] = std::move(outputs[k]);
      }
    }
    if (!status.ok()) {
      if (status.message().find(sample.path) != std::string_view::npos) return status;
      return status.with_context(fmt::format("sample \"{}\"", sample.path));
    }
    counters_[n].calls++;
    counters_[n].nanos += nanos_since(start);
  }
  for (int slot : output_slots_) result.tensors.push_back(slots[slot]);
  for (int slot : gpu_input_slots_) result.tensors.push_back(slots[slot]);
  return result;
}

std::vector<Result<Pipeline::Sample>> Pipeline::process_all(const std::vector<SampleInput>& samples,
                                                            int64_t epoch) {
  std::vector<std::optional<Result<Sample>>> results(samples.size());
  // Samples are claimed one at a time (their cost varies several-fold with the crop), so no
  // runner idles while another still holds a long static chunk.
  const auto n = static_cast<int64_t>(samples.size());
  std::atomic<int64_t> next{0};
  pool_.parallel_for(pool_.size() + 1, [&](int64_t, int64_t) {
    for (int64_t i; (i = next.fetch_add(1)) < n;) results[i].emplace(process(samples[i], epoch));
  });
  std::vector<Result<Sample>> out;
  out.reserve(samples.size());
  for (auto& r : results) out.push_back(std::move(*r));
  return out;
}

void Pipeline::produce(int64_t epoch) {
  const int64_t batch_size = options_.batch_size;
  // The end of the epoch and errors follow the batches through the GPU stage when there is one.
  auto finish = [this](auto item) {
    if (!gpu_.empty()) {
      gpu_queue_.push(GpuItem{gpu_seq_++, std::move(item)});
    } else {
      queue_.push(std::move(item));
    }
  };
  while (!stopping_) {
    std::vector<SampleRef> refs = reader_->next_batch(batch_size);
    if (refs.empty()) {
      finish(EndOfEpoch{});
      return;
    }
    std::vector<Sample> good;
    std::vector<std::string> paths;
    int64_t num_padded = 0;
    while (!refs.empty()) {
      std::vector<SampleInput> samples;
      for (const SampleRef& ref : refs) samples.push_back(file_sample(ref));
      std::vector<Result<Sample>> results = process_all(samples, epoch);
      for (size_t i = 0; i < refs.size(); ++i) {
        const std::string& path = samples[i].path;
        if (results[i].ok()) {
          good.push_back(std::move(results[i]).value());
          paths.push_back(path);
          num_padded += refs[i].padded ? 1 : 0;
          continue;
        }
        const Status& status = results[i].status();
        if (options_.bad_data == BadDataPolicy::kError) {
          finish(status);
          return;
        }
        log(LogLevel::kWarning, "pipeline: skipping sample \"{}\": {}", path, status.message());
        std::lock_guard lock(bad_mutex_);
        bad_samples_.push_back({epoch, path, std::string(status.message())});
      }
      // Replace skipped samples with the next ones of the epoch, in order.
      refs.clear();
      while (static_cast<int64_t>(good.size() + refs.size()) < batch_size) {
        std::optional<SampleRef> next = reader_->next_sample();
        if (!next) break;
        refs.push_back(*next);
      }
    }
    const auto short_by = batch_size - static_cast<int64_t>(good.size());
    if (good.empty()) continue;
    if (short_by > 0) {
      // Only reached at the end of an epoch after skips.
      if (last_batch_policy_ == LastBatchPolicy::kDrop) continue;
      if (last_batch_policy_ == LastBatchPolicy::kFill) {
        const size_t have = good.size();
        for (int64_t i = 0; i < short_by; ++i) {
          good.push_back(good[static_cast<size_t>(i) % have]);
          paths.push_back(paths[static_cast<size_t>(i) % have]);
          ++num_padded;
        }
      }
    }
    if (!gpu_.empty()) {
      if (!gpu_queue_.push(GpuItem{gpu_seq_++, Pending{epoch, std::move(good), std::move(paths),
                                                       num_padded, reader_->position()}})) {
        return;
      }
      continue;
    }
    Result<Batch> batch = assemble(nullptr, epoch, std::move(good), std::move(paths), num_padded);
    if (!batch.ok()) {
      queue_.push(batch.status());
      return;
    }
    batch->position = reader_->position();
    if (!queue_.push(std::move(*batch))) return;
  }
}

Result<std::map<size_t, kernels::GpuImages>> Pipeline::run_gpu(kernels::GpuStream& stream,
                                                               const std::vector<Sample>& samples) {
  std::map<int, kernels::GpuImages> made;  // by slot
  std::vector<kernels::GpuStep> steps(samples.size());
  std::vector<Tensor> host(samples.size());
  for (size_t g = 0; g < gpu_nodes_.size(); ++g) {
    const size_t n = gpu_nodes_[g];
    const Node& node = nodes_[n];
    const auto start = Clock::now();
    const int in = node.inputs[0];
    const bool reads_host = node.op->gpu_reads_host();
    if (!slot_on_gpu_[static_cast<size_t>(in)]) {
      const size_t at =
          output_slots_.size() +
          static_cast<size_t>(std::find(gpu_input_slots_.begin(), gpu_input_slots_.end(), in) -
                              gpu_input_slots_.begin());
      for (size_t i = 0; i < samples.size(); ++i) host[i] = samples[i].tensors[at];
      if (!reads_host && !made.contains(in)) {
        KILN_ASSIGN_OR_RETURN(made[in], stream.upload(host, &pool_));
      }
    }
    for (size_t i = 0; i < samples.size(); ++i) steps[i] = samples[i].steps[g];
    Result<kernels::GpuImages> out = node.op->run_gpu(
        stream, made[in], reads_host ? std::span<const Tensor>(host) : std::span<const Tensor>(),
        steps);
    if (!out.ok()) {
      return out.status().with_context(
          fmt::format("pipeline operator #{} ({}) on the GPU", n, node.op->schema().name));
    }
    made[node.outputs[0]] = std::move(*out);
    counters_[n].nanos += nanos_since(start);
  }
  KILN_RETURN_IF_ERROR(stream.synchronize());
  std::map<size_t, kernels::GpuImages> outputs;
  for (size_t k = 0; k < output_slots_.size(); ++k) {
    auto it = made.find(output_slots_[k]);
    if (it != made.end()) outputs[k] = it->second;
  }
  return outputs;
}

namespace {

// The host form of GPU batch `images`: one dense tensor from `allocate` when the shapes agree (the
// samples view it), else one buffer the samples view in turn; `copy` fills it.
Result<TensorList> host_list(const kernels::GpuImages& images,
                             const std::function<Status(void*, size_t)>& copy,
                             const std::function<Result<Tensor>(DType, Shape)>& allocate) {
  TensorList list;
  const size_t n = images.size();
  const std::optional<Shape> uniform = images.uniform_shape();
  if (uniform) {
    std::vector<int64_t> dims{static_cast<int64_t>(n)};
    dims.insert(dims.end(), uniform->begin(), uniform->end());
    KILN_ASSIGN_OR_RETURN(list.dense, allocate(images.dtype, Shape(std::move(dims))));
    KILN_RETURN_IF_ERROR(copy(list.dense.raw_data(), list.dense.nbytes()));
    auto owner = std::make_shared<Tensor>(list.dense);
    const size_t bytes = list.dense.nbytes() / std::max<size_t>(n, 1);
    auto* base = static_cast<uint8_t*>(list.dense.raw_data());
    for (size_t i = 0; i < n; ++i) {
      list.samples.push_back(Tensor::wrap(images.dtype, *uniform, base + i * bytes, owner));
    }
    return list;
  }
  int64_t total = 0;
  for (const Shape& shape : images.shapes) total += shape.numel();
  KILN_ASSIGN_OR_RETURN(Tensor all, kernels::allocate_uninitialized(images.dtype, Shape{total}));
  KILN_RETURN_IF_ERROR(copy(all.raw_data(), all.nbytes()));
  auto owner = std::make_shared<Tensor>(all);
  auto* base = static_cast<uint8_t*>(all.raw_data());
  for (const Shape& shape : images.shapes) {
    list.samples.push_back(Tensor::wrap(images.dtype, shape, base, owner));
    base += static_cast<size_t>(shape.numel()) * dtype_size(images.dtype);
  }
  return list;
}

}  // namespace

Result<TensorList> TensorList::to_host() const {
  if (!on_gpu()) return *this;
  return host_list(
      gpu, [&](void* host, size_t bytes) { return kernels::copy_to_host(gpu, host, bytes); },
      [](DType dtype, Shape shape) { return kernels::allocate_uninitialized(dtype, shape); });
}

Result<Batch> Pipeline::assemble(kernels::GpuStream* stream, int64_t epoch,
                                 std::vector<Sample> samples, std::vector<std::string> paths,
                                 int64_t num_padded) {
  std::map<size_t, kernels::GpuImages> gpu_outputs;
  if (stream != nullptr) {
    KILN_ASSIGN_OR_RETURN(gpu_outputs, run_gpu(*stream, samples));
  }
  auto start = Clock::now();
  Batch batch;
  batch.epoch = epoch;
  batch.paths = std::move(paths);
  batch.num_padded = num_padded;
  const size_t n = samples.size();
  for (size_t k = 0; k < output_slots_.size(); ++k) {
    TensorList list;
    auto gpu = gpu_outputs.find(k);
    if (gpu != gpu_outputs.end() && options_.gpu_outputs_on_device) {
      list.gpu = std::move(gpu->second);
      batch.outputs.push_back(std::move(list));
      continue;
    }
    if (gpu != gpu_outputs.end()) {
      // Copied back into host tensors of the same shapes, one dense buffer when they agree.
      const kernels::GpuImages& images = gpu->second;
      KILN_ASSIGN_OR_RETURN(
          list, host_list(
                    images,
                    [&](void* host, size_t bytes) { return stream->download(images, host, bytes); },
                    [&](DType dtype, Shape shape) { return buffers_->allocate(dtype, shape); }));
      batch.outputs.push_back(std::move(list));
      continue;
    }
    for (size_t i = 0; i < n; ++i) list.samples.push_back(std::move(samples[i].tensors[k]));
    bool uniform = true;
    for (size_t i = 1; i < n; ++i) {
      uniform = uniform && list.samples[i].shape() == list.samples[0].shape() &&
                list.samples[i].dtype() == list.samples[0].dtype();
    }
    const DType dtype = list.samples[0].dtype();
    const Shape shape = list.samples[0].shape();
    if (uniform && dtype != DType::kString) {
      std::vector<int64_t> dims{static_cast<int64_t>(n)};
      dims.insert(dims.end(), shape.begin(), shape.end());
      Result<Tensor> dense = buffers_->allocate(dtype, Shape(std::move(dims)));
      if (dense.ok()) {
        auto owner = std::make_shared<Tensor>(*dense);
        auto* base = static_cast<uint8_t*>(dense->raw_data());
        const size_t bytes = list.samples[0].nbytes();
        // The copy is split over the runners when it is large (a batch of images).
        pool_.parallel_for(
            static_cast<int64_t>(n),
            [&](int64_t begin, int64_t end) {
              for (auto i = static_cast<size_t>(begin); i < static_cast<size_t>(end); ++i) {
                if (bytes > 0) std::memcpy(base + i * bytes, list.samples[i].raw_data(), bytes);
              }
            },
            bytes >= (size_t{1} << 16) ? 1 : static_cast<int64_t>(n));
        for (size_t i = 0; i < n; ++i) {
          list.samples[i] = Tensor::wrap(dtype, shape, base + i * bytes, owner);
        }
        list.dense = std::move(*dense);
      }
    }
    batch.outputs.push_back(std::move(list));
  }
  const size_t last = stage_names_.size() - 1;
  counters_[last].calls++;
  counters_[last].nanos += nanos_since(start);
  return batch;
}

}  // namespace kiln::pipeline
