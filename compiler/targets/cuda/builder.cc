// SPDX-License-Identifier: Apache-2.0
// Building a cuda Program from a graph: buffers (plain or NHWC, constants), reorders between
// layouts, the lowering rules tried for each node, host ref steps, the memory plan.
#include "compiler/targets/cuda/builder.h"

#include <fmt/format.h>

#include <algorithm>

#include "compiler/targets/ref/kernel.h"
#include "core/env.h"
#include "core/logging.h"

namespace kiln::compiler::cuda {

namespace {

using runtime::byte_size;
using runtime::RefSlot;

// A node run by its ref kernel on the host: inputs copied out of the arena into pinned staging,
// outputs copied back in.
class HostStep final : public Step {
 public:
  struct Slot : RefSlot {
    const void* host = nullptr;  // a constant's host data (no copy needed)
    size_t offset = 0;           // in the session's host-step staging
  };
  HostStep(const Node& node, std::vector<Slot> inputs, std::vector<Slot> outputs)
      : inputs_(std::move(inputs)),
        outputs_(std::move(outputs)),
        ref_inputs_(inputs_.begin(), inputs_.end()),
        ref_outputs_(outputs_.begin(), outputs_.end()) {
    this->node = &node;
    kind = std::string(node.op().name());
    on_device = false;
  }

  Status run(Session& session) const override {
    uint8_t* host = session.pinned + session.host_staging;
    for (const Slot& s : inputs_) {
      if (s.buffer < 0 || s.host != nullptr || s.bytes == 0) continue;
      KILN_RETURN_IF_ERROR(
          check_cuda(cudaMemcpyAsync(host + s.offset, session.device[static_cast<size_t>(s.buffer)],
                                     s.bytes, cudaMemcpyDeviceToHost, session.stream),
                     "copying a host step's input from the device"));
    }
    KILN_RETURN_IF_ERROR(check_cuda(cudaStreamSynchronize(session.stream), "a device step"));
    std::vector<void*> in(inputs_.size(), nullptr);
    for (size_t i = 0; i < inputs_.size(); ++i) {
      const Slot& s = inputs_[i];
      if (s.buffer >= 0) in[i] = s.host != nullptr ? const_cast<void*>(s.host) : host + s.offset;
    }
    std::vector<void*> out(outputs_.size());
    for (size_t i = 0; i < outputs_.size(); ++i) out[i] = host + outputs_[i].offset;
    KILN_RETURN_IF_ERROR(runtime::run_ref_step(*node, nullptr, session.interpreter.get(),
                                               ref_inputs_, in, ref_outputs_, out));
    for (const Slot& s : outputs_) {
      if (s.bytes == 0) continue;
      KILN_RETURN_IF_ERROR(
          check_cuda(cudaMemcpyAsync(session.device[static_cast<size_t>(s.buffer)], host + s.offset,
                                     s.bytes, cudaMemcpyHostToDevice, session.stream),
                     "copying a host step's output to the device"));
    }
    return Status();
  }

 private:
  std::vector<Slot> inputs_;
  std::vector<Slot> outputs_;
  std::vector<RefSlot> ref_inputs_;  // their types, as run_ref_step takes them
  std::vector<RefSlot> ref_outputs_;
};

}  // namespace

int Builder::stored_buffer(const Value* v) const {
  auto it = value_buffers_.find(v);
  KILN_CHECK(it != value_buffers_.end());
  return it->second;
}

// A 4-D tensor of one pixel ([N, C, 1, 1], squeeze-and-excitation's) has the same bytes in
// either layout: it needs no reorder.
static bool one_pixel(const Shape& s) {
  return s.rank() == 4 && s[2] * s[3] == 1;
}

int Builder::buffer_of(const Value* v) {
  const int id = stored_buffer(v);
  // The stored buffer's own shape counts too: a one-pixel NHWC buffer reshaped to another rank
  // (a detector head's [N, A*K, 1, 1] as [N, A, K, 1, 1]) is already plain.
  const Buffer& stored = buffers_[static_cast<size_t>(id)];
  if (!stored.nhwc || one_pixel(stored.shape) || one_pixel(v->tensor_type().shape())) return id;
  if (auto it = plain_copies_.find(v); it != plain_copies_.end()) return it->second;
  Buffer b = buffers_[static_cast<size_t>(id)];
  b.nhwc = false;
  b.first = b.last = -1;
  const int copy = add_buffer(std::move(b));
  plain_copies_[v] = copy;
  add_reorder(*this, id, copy, v->tensor_type().shape(), false);
  return copy;
}

int Builder::buffer_nhwc(const Value* v) {
  const int id = stored_buffer(v);
  if (buffers_[static_cast<size_t>(id)].nhwc || one_pixel(v->tensor_type().shape())) return id;
  if (auto it = nhwc_copies_.find(v); it != nhwc_copies_.end()) return it->second;
  // The stored buffer may be another shape's: a Reshape shares its input's bytes (a channel
  // shuffle's 5-D Transpose, reshaped back to 4-D), so the copy takes the value's own shape.
  const Shape& shape = v->tensor_type().shape();
  KILN_CHECK(shape.rank() == 4, "buffer_nhwc on a tensor that is not 4-D");
  Buffer b = buffers_[static_cast<size_t>(id)];
  b.shape = shape;
  b.nhwc = true;
  b.constant = false;
  b.host = nullptr;
  b.owned = nullptr;
  b.first = b.last = -1;
  const int copy = add_buffer(std::move(b));
  nhwc_copies_[v] = copy;
  add_reorder(*this, id, copy, v->tensor_type().shape(), true);
  return copy;
}

bool Builder::nhwc_convolutions(DType dtype) {
  const std::string layout = env_flag_string(EnvFlag::kCudaLayout);
  if (layout == "nhwc") return true;
  if (layout == "nchw") return false;
  return dtype == DType::kF16 || dtype == DType::kBF16;
}

int Builder::define(const Value* v, bool nhwc) {
  Buffer b;
  b.dtype = v->tensor_type().dtype;
  b.shape = v->tensor_type().shape();
  b.nhwc = nhwc && b.shape.rank() == 4;
  b.bytes = byte_size(b.dtype, b.shape);
  const int id = add_buffer(std::move(b));
  value_buffers_[v] = id;
  return id;
}

int Builder::scratch(DType dtype, Shape shape, bool nhwc) {
  Buffer b;
  b.dtype = dtype;
  b.nhwc = nhwc && shape.rank() == 4;
  b.bytes = byte_size(dtype, shape);
  b.shape = std::move(shape);
  return add_buffer(std::move(b));
}

int Builder::define_buffer(const Value* v, Buffer b) {
  const int id = add_buffer(std::move(b));
  if (v != nullptr) value_buffers_[v] = id;
  return id;
}

int Builder::constant(std::vector<float> values) {
  std::vector<uint8_t> bytes(values.size() * sizeof(float));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return constant_bytes(DType::kF32, Shape{static_cast<int64_t>(values.size())}, std::move(bytes));
}

int Builder::constant_bytes(DType dtype, Shape shape, std::vector<uint8_t> bytes) {
  auto data = std::make_shared<std::vector<uint8_t>>(std::move(bytes));
  Buffer b;
  b.dtype = dtype;
  b.shape = std::move(shape);
  b.bytes = data->size();
  b.constant = true;
  b.host = data->data();
  b.owned = std::move(data);
  return add_buffer(std::move(b));
}

void Builder::add_step(std::unique_ptr<Step> step) {
  append_step(std::move(step), [](int id) { return id; });
}

const Node* Builder::only_consumer(const Value* v) const {
  for (const Value* out : graph_.outputs()) {
    if (out == v) return nullptr;
  }
  if (v->uses().size() != 1) return nullptr;
  return v->uses()[0].node;
}

void Builder::add_host_step(const Node& node) {
  size_t at = 0;
  auto slot = [&](const Value* v, int id) {
    HostStep::Slot s;
    s.buffer = id;
    s.dtype = v->tensor_type().dtype;
    s.shape = v->tensor_type().shape();
    s.bytes = byte_size(s.dtype, s.shape);
    const Buffer& b = buffer(id);
    if (b.constant) {
      s.host = b.host;
    } else {
      s.offset = at;
      at += arena_align(s.bytes);
    }
    return s;
  };
  std::vector<HostStep::Slot> inputs;
  std::vector<int> reads;
  for (const Value* v : node.inputs()) {
    if (v == nullptr) {
      inputs.emplace_back();
      continue;
    }
    inputs.push_back(slot(v, buffer_of(v)));
    reads.push_back(inputs.back().buffer);
  }
  std::vector<HostStep::Slot> outputs;
  std::vector<int> writes;
  for (const Value* v : node.outputs()) {
    outputs.push_back(slot(v, define(v)));
    writes.push_back(outputs.back().buffer);
  }
  host_step_bytes_ = std::max(host_step_bytes_, at);
  auto step = std::make_unique<HostStep>(node, std::move(inputs), std::move(outputs));
  step->reads = std::move(reads);
  step->writes = std::move(writes);
  add_step(std::move(step));
}

const std::vector<uint8_t>* Builder::known_choice(const std::string& key) const {
  for (const Tuning* t : {static_cast<const Tuning*>(tuner_.found), tuner_.stored}) {
    if (t == nullptr) continue;
    auto it = t->choices.find(key);
    if (it != t->choices.end()) return &it->second;
  }
  return nullptr;
}

void Builder::record_choice(const std::string& key, std::vector<uint8_t> bytes, bool measured) {
  if (tuner_.found != nullptr) tuner_.found->choices[key] = std::move(bytes);
  if (tuner_.progress != nullptr) tuner_.progress->step(measured);
}

Result<std::unique_ptr<Program>> Builder::build() {
  if (std::string why = runtime::why_not_plannable(graph_); !why.empty()) {
    log(LogLevel::kDebug, "cuda target: the interpreter runs graph \"{}\": {}", graph_.name(), why);
    return std::unique_ptr<Program>();
  }
  std::vector<int> inputs;
  for (const Value* v : graph_.inputs()) {
    inputs.push_back(define(v));
    buffers_.back().first = 0;
  }
  plan_attention(*this);
  for (const auto& node : graph_.nodes()) {
    if (is_fused(node.get())) continue;
    if (node->kind() == OpKind::kConstant) {
      const Tensor* c = node->output(0)->constant_value();
      if (c == nullptr) return std::unique_ptr<Program>();
      Buffer b;
      b.dtype = c->dtype();
      b.shape = c->shape();
      b.bytes = c->nbytes();
      b.constant = true;
      b.host = c->raw_data();
      value_buffers_[node->output(0)] = add_buffer(std::move(b));
      continue;
    }
    current_ = node.get();
    KILN_ASSIGN_OR_RETURN(bool lowered, lower_device(*this, *node));
    if (!lowered) add_host_step(*node);
  }
  // Outputs stored NHWC are reordered back after the last node.
  std::vector<int> outputs;
  std::vector<Shape> output_shapes;
  for (const Value* v : graph_.outputs()) {
    outputs.push_back(buffer_of(v));
    output_shapes.push_back(v->tensor_type().shape());
  }
  MemoryPlan plan = plan_arena(inputs, outputs, kArenaAlignment, [](const Buffer& b) {
    return BufferLifetime{b.constant ? 0 : b.bytes, std::max(b.first, 0), std::max(b.last, 0)};
  });
  auto program = std::make_unique<Program>(std::move(buffers_), std::move(steps_),
                                           std::move(inputs), std::move(outputs), std::move(plan),
                                           workspace_bytes_, host_step_bytes_, seed_);
  program->set_output_shapes(std::move(output_shapes));
  KILN_RETURN_IF_ERROR(program->upload_constants());
  return program;
}

}  // namespace kiln::compiler::cuda
