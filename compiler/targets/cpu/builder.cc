// SPDX-License-Identifier: Apache-2.0
// Building a Program from a graph: buffers and their layouts, views, reorders, ref steps, the
// lowering rules tried for each node, threads per step, the memory plan.
#include "compiler/targets/cpu/builder.h"

#include <fmt/format.h>

#include <cstring>

#include "compiler/ops/all_ops.h"
#include "compiler/passes/rewrite.h"
#include "compiler/targets/cpu/conv_gate.h"
#include "compiler/targets/cpu/onednn.h"
#include "compiler/targets/ref/kernel.h"
#include "core/logging.h"

namespace kiln::compiler::cpu {

namespace {

using runtime::byte_size;
using runtime::RefSlot;

// A node whose kernel runs on the ref path over plain buffers.
class RefStep final : public Step {
 public:
  RefStep(const Node& node, const ref::NodeKernel* kernel, std::vector<RefSlot> inputs,
          std::vector<RefSlot> outputs)
      : kernel_(kernel), inputs_(std::move(inputs)), outputs_(std::move(outputs)) {
    this->node = &node;
    kind = std::string(node.op().name());
  }

  Status run(StepContext& ctx) const override {
    std::vector<void*> in(inputs_.size(), nullptr);
    for (size_t i = 0; i < inputs_.size(); ++i) {
      if (inputs_[i].buffer >= 0) in[i] = ctx.data[static_cast<size_t>(inputs_[i].buffer)];
    }
    std::vector<void*> out(outputs_.size());
    for (size_t i = 0; i < outputs_.size(); ++i) {
      out[i] = ctx.data[static_cast<size_t>(outputs_[i].buffer)];
    }
    return runtime::run_ref_step(*node, kernel_, ctx.interpreter, inputs_, in, outputs_, out);
  }
  const char* runs_on() const override { return kernel_ != nullptr ? "node" : "ref"; }

 private:
  const ref::NodeKernel* kernel_;
  std::vector<RefSlot> inputs_;
  std::vector<RefSlot> outputs_;
};

}  // namespace

namespace {

int64_t numel_of(const Value* v) {
  return v != nullptr && v->type().is_tensor() && v->tensor_type().is_static()
             ? v->tensor_type().shape().numel()
             : 0;
}

// The elements `node` reads and writes, weights included.
int64_t elements_of(const Node& node) {
  int64_t elements = 0;
  for (const Value* v : node.inputs()) elements += numel_of(v);
  for (const Value* v : node.outputs()) elements += numel_of(v);
  return elements;
}

}  // namespace

int64_t ProgramBuilder::work_of(const Node& node) {
  const int64_t elements = elements_of(node);
  auto dim = [](const Value* v, int i) {
    const Shape& s = v->tensor_type().shape();
    return i < s.rank() ? s[i] : int64_t{1};
  };
  const Value* x = node.has_input(0) ? node.input(0) : nullptr;
  const Value* w = node.has_input(1) ? node.input(1) : nullptr;
  if (node.kind() != OpKind::kIf &&
      (x == nullptr || w == nullptr || numel_of(x) == 0 || numel_of(w) == 0)) {
    return elements;
  }
  switch (node.kind()) {
    case OpKind::kConv:
    case OpKind::kConvInteger:
      // Each output element takes C/group x kernel multiply-adds: the weights' numel over the
      // output channels.
      return std::max(elements,
                      numel_of(node.output(0)) * (numel_of(w) / std::max<int64_t>(dim(w, 0), 1)));
    case OpKind::kMatMul:
    case OpKind::kGemm:
    case OpKind::kMatMulInteger: {
      const Shape& xs = x->tensor_type().shape();
      const int64_t k = xs.rank() > 0 ? xs[xs.rank() - 1] : 1;
      return std::max(elements, numel_of(node.output(0)) * k);
    }
    case OpKind::kLSTM:
    case OpKind::kGRU:
    case OpKind::kRNN: {
      // Every step multiplies the input and the hidden state by the gates' weights (W and R).
      const Value* r = node.has_input(2) ? node.input(2) : nullptr;
      const int64_t steps = dim(x, 0) * dim(x, 1);  // [seq, batch] or [batch, seq]
      return std::max(elements, steps * (numel_of(w) + numel_of(r)));
    }
    case OpKind::kIf: {
      // The branch that takes longer.
      int64_t most = 0;
      for (const Graph* branch : node.op().subgraphs()) {
        int64_t work = 0;
        for (const auto& n : branch->nodes()) work += work_of(*n);
        most = std::max(most, work);
      }
      return std::max(elements, most);
    }
    default: return elements;
  }
}

bool ProgramBuilder::is_small(const Node& node) {
  // Elements read and written, weights included: a 1x1 convolution of squeeze-and-excitation
  // (1152 -> 48 channels on one pixel: 57K) is small; a classifier's weights are not.
  constexpr int64_t kSmallElements = 64 * 1024;
  if (elements_of(node) <= kSmallElements) return true;
  // A convolution or matrix product of at most 1M multiply-adds takes tens of microseconds on one
  // core: about what handing half of it to a sleeping thread costs, and far less than waiting for
  // one the scheduler has not run yet on a busy machine.
  const int64_t work = work_of(node);
  return work != elements_of(node) && work <= kSmallStepWork;
}

int ProgramBuilder::buffer_of(const Value* v) const {
  auto it = value_buffers_.find(v);
  KILN_CHECK(it != value_buffers_.end(), "cpu program: a value is used before it is defined");
  return it->second;
}

dnnl::memory::desc ProgramBuilder::layout_of(const Value* v) const {
  const Buffer& b = buffer(buffer_of(v));
  return b.layout.is_zero() ? plain_desc(b.shape, b.dtype) : b.layout;
}

int ProgramBuilder::in_layout(const Value* v, const dnnl::memory::desc& want) {
  const int id = buffer_of(v);
  if (layout_of(v) == want) return id;
  if (is_row_major(layout_of(v)) && is_row_major(want) && want.get_size() == buffer(id).bytes) {
    return id;
  }
  for (const auto& [layout, reordered] : reorders_[id]) {
    if (layout == want) return reordered;
  }
  const dnnl::memory::desc from = layout_of(v);
  Buffer b;
  // The reordered buffer keeps the element type, unless the reorder converts it (to bf16, say).
  b.dtype = find_dnnl_type(buffer(id).dtype) == want.data_type() ? buffer(id).dtype
                                                                 : dtype_of(want.data_type());
  b.shape = buffer(id).shape;
  b.layout = want;
  b.bytes = want.get_size();
  const int to = add_buffer(std::move(b));
  dnnl::reorder reorder(dnnl::reorder::primitive_desc(engine_, from, engine_, want));
  auto step = std::make_unique<PrimitiveStep>(
      engine_, reorder,
      std::vector<PrimitiveStep::Arg>{{DNNL_ARG_SRC, id, from, {}}, {DNNL_ARG_DST, to, want, {}}});
  step->node = v->producer() != nullptr ? v->producer() : v->uses().front().node;
  step->kind = "Reorder";
  step->reads = {id};
  step->writes = {to};
  add_step(std::move(step));
  reorders_[id].emplace_back(want, to);
  return to;
}

int ProgramBuilder::plain(const Value* v) {
  const Buffer& b = buffer(buffer_of(v));
  if (b.is_plain()) return buffer_of(v);
  return in_layout(v, plain_desc(b.shape, b.dtype));
}

int ProgramBuilder::define(const Value* v, const dnnl::memory::desc& layout) {
  const TensorType& t = v->tensor_type();
  Buffer b;
  b.dtype = t.dtype;
  b.shape = t.shape();
  b.layout = layout;
  b.bytes = layout.is_zero() ? byte_size(t.dtype, b.shape) : layout.get_size();
  const auto& outs = graph_.outputs();
  for (size_t i = 0; i < outs.size(); ++i) {
    if (outs[i] == v && b.is_plain()) {
      b.kind = Buffer::Kind::kOutput;
      b.index = static_cast<int>(i);
      break;
    }
  }
  const int id = add_buffer(std::move(b));
  value_buffers_[v] = id;
  return id;
}

int ProgramBuilder::scratch(size_t bytes) {
  if (bytes == 0) return -1;
  Buffer b;
  b.dtype = DType::kU8;
  b.shape = Shape{static_cast<int64_t>(bytes)};
  b.bytes = bytes;
  return add_buffer(std::move(b));
}

void ProgramBuilder::add_step(std::unique_ptr<Step> step) {
  append_step(std::move(step), [&](int id) {
    const Buffer& b = buffer(id);
    return b.kind == Buffer::Kind::kView ? b.view_of : id;
  });
}

void ProgramBuilder::rebind(const Value* v, int id) {
  value_buffers_[v] = id;
  reorders_.erase(id);  // copies of the bytes before the update
}

bool ProgramBuilder::can_overwrite(const Value* v, const Node& consumer) const {
  auto it = value_buffers_.find(v);
  if (it == value_buffers_.end()) return false;
  const Buffer& b = buffer(it->second);
  if (b.kind != Buffer::Kind::kArena || viewed_.count(it->second) != 0) return false;
  // Every value naming these bytes (`v`, and those updated in place before it) is read by no
  // step after the consumer's.
  for (const auto& [other, id] : value_buffers_) {
    if (id != it->second) continue;
    if (is_graph_output(other)) return false;
    for (const Use& u : other->uses()) {
      if (u.node != &consumer && done_.count(u.node) == 0 && !is_fused(u.node)) return false;
    }
  }
  return true;
}

bool ProgramBuilder::add_view(const Node& node) {
  if (node.graph() == &graph_ && node.has_input(0) && add_strided_view(node)) return true;
  switch (node.kind()) {
    case OpKind::kReshape:
    case OpKind::kFlatten:
    case OpKind::kSqueeze:
    case OpKind::kUnsqueeze:
    case OpKind::kIdentity: break;
    default: return false;
  }
  if (node.graph() != &graph_ || node.num_outputs() != 1 || !node.has_input(0)) return false;
  const Value* x = node.input(0);
  const Value* y = node.output(0);
  if (!x->type().is_tensor() || !y->type().is_tensor() || !has_buffer(x)) return false;
  const TensorType& yt = y->tensor_type();
  if (yt.dtype != x->tensor_type().dtype ||
      yt.shape().numel() != x->tensor_type().shape().numel()) {
    return false;
  }
  add_view_buffer(y, plain(x), 0, dnnl::memory::desc());
  return true;
}

int ProgramBuilder::add_view_buffer(const Value* v, int of, size_t offset,
                                    const dnnl::memory::desc& layout) {
  if (buffer(of).kind == Buffer::Kind::kView) {
    offset += buffer(of).offset;
    of = buffer(of).view_of;
  }
  const TensorType& t = v->tensor_type();
  Buffer b;
  b.kind = Buffer::Kind::kView;
  b.dtype = t.dtype;
  b.shape = t.shape();
  b.layout = layout;
  b.bytes = layout.is_zero() ? byte_size(b.dtype, b.shape) : layout.get_size();
  b.view_of = of;
  b.offset = offset;
  viewed_.insert(of);
  const int id = add_buffer(std::move(b));
  value_buffers_[v] = id;
  return id;
}

const Node* ProgramBuilder::sum_partner(const Node* node) const {
  auto it = sum_partners_.find(node);
  return it != sum_partners_.end() ? it->second : nullptr;
}

void ProgramBuilder::plan_sum_fusion() {
  // Add(Conv(...), r) where the Conv's output feeds only the Add: the Conv adds r itself.
  for (const auto& node : graph_.nodes()) {
    if (node->kind() != OpKind::kAdd || node->num_inputs() != 2) continue;
    const Value* y = node->output(0);
    for (int i = 0; i < 2; ++i) {
      const Value* x = node->input(i);
      const Value* r = node->input(1 - i);
      const Node* conv = x->producer();
      if (conv == nullptr || conv->kind() != OpKind::kConv || sum_partners_.count(conv) != 0) {
        continue;
      }
      if (x->uses().size() != 1 || is_graph_output(x) || x == r) continue;
      const DType dtype = x->tensor_type().dtype;
      if ((dtype != DType::kF32 && dtype != DType::kBF16) || r->tensor_type().dtype != dtype ||
          x->tensor_type().shape() != y->tensor_type().shape() ||
          r->tensor_type().shape() != y->tensor_type().shape()) {
        continue;
      }
      if (!conv->has_input(1) || conv->input(1)->constant_value() == nullptr) continue;
      sum_partners_[conv] = node.get();
      sum_partners_[node.get()] = conv;
      break;
    }
  }
}

void ProgramBuilder::add_ref_step(const Node& node) {
  auto slot = [&](int id) {
    RefSlot s;
    s.buffer = id;
    if (id >= 0) {
      const Buffer& b = buffer(id);
      s.dtype = b.dtype;
      s.shape = b.shape;
      s.bytes = b.bytes;
    }
    return s;
  };
  std::vector<RefSlot> inputs;
  for (const Value* v : node.inputs()) inputs.push_back(slot(v != nullptr ? plain(v) : -1));
  std::vector<RefSlot> outputs;
  for (const Value* v : node.outputs()) outputs.push_back(slot(define(v, dnnl::memory::desc())));
  const ref::NodeKernel* kernel = nullptr;
  if (make_kernel_ && kernels_ != nullptr) {
    if (std::unique_ptr<ref::NodeKernel> made = make_kernel_(node)) {
      kernel = made.get();
      kernels_->emplace(&node, std::move(made));
    }
  }
  std::vector<int> reads;
  std::vector<int> writes;
  for (const RefSlot& s : inputs) {
    if (s.buffer >= 0) reads.push_back(s.buffer);
  }
  for (const RefSlot& s : outputs) writes.push_back(s.buffer);
  auto step = std::make_unique<RefStep>(node, kernel, std::move(inputs), std::move(outputs));
  step->reads = std::move(reads);
  step->writes = std::move(writes);
  add_step(std::move(step));
}

Status ProgramBuilder::lower_gate_alone(const Node& conv) {
  std::optional<ConvGate> gate = absorbed_gate(conv);
  if (!gate || has_buffer(conv.input(0))) return Status();
  done_.insert(gate->mul);
  KILN_ASSIGN_OR_RETURN(bool lowered, lower_dnnl(*this, *gate->mul));
  if (!lowered) add_ref_step(*gate->mul);
  return Status();
}

void ProgramBuilder::release_if_unread(const Value* v) {
  const Node* producer = v->producer();
  if (!release_ || producer == nullptr || producer->kind() != OpKind::kConstant ||
      is_graph_output(v) || !released_.insert(v).second) {
    return;
  }
  auto it = value_buffers_.find(v);
  if (it == value_buffers_.end()) return;
  const int id = it->second;
  Buffer& b = buffers_[static_cast<size_t>(id)];
  if (b.kind != Buffer::Kind::kConstant || b.last >= 0 || viewed_.count(id) != 0 ||
      reorders_.count(id) != 0) {
    return;
  }
  for (const Use& u : v->uses()) {
    if (done_.count(u.node) == 0 && !is_fused(u.node)) {
      released_.erase(v);  // offered again once its other users are lowered
      return;
    }
  }
  if (release_(v)) b.constant = nullptr;
}

Result<std::unique_ptr<Program>> ProgramBuilder::build() {
  try {
    return build_program();
  } catch (const dnnl::error& e) {
    return internal_error(
        fmt::format("cpu target: {}: oneDNN refused a layout the program needs: {}",
                    building_ != nullptr ? building_->describe() : "the outputs", e.what()));
  }
}

Result<std::unique_ptr<Program>> ProgramBuilder::build_branch(
    const Graph& branch, std::vector<const Value*> captures) const {
  ProgramBuilder sub(branch, engine_, kernels_, make_kernel_, seed_);
  sub.set_captures(std::move(captures));
  return sub.build();
}

Status ProgramBuilder::lower_node(const Node& node) {
  KILN_ASSIGN_OR_RETURN(bool lowered, lower_dnnl(*this, node));
  if (lowered) return Status();
  // A Conv whose Add could not take it: the Conv runs first, then the Add on its own.
  if (const Node* conv = sum_partner(&node); conv != nullptr && !has_buffer(conv->output(0))) {
    KILN_RETURN_IF_ERROR(lower_gate_alone(*conv));
    add_ref_step(*conv);
  }
  KILN_RETURN_IF_ERROR(lower_gate_alone(node));
  add_ref_step(node);
  return Status();
}

Result<bool> ProgramBuilder::lower_nodes() {
  for (const auto& node : graph_.nodes()) {
    if (is_fused(node.get())) continue;
    if (node->kind() == OpKind::kConstant) {
      const Tensor* c = node->output(0)->constant_value();
      if (c == nullptr) return false;
      Buffer b;
      b.kind = Buffer::Kind::kConstant;
      b.dtype = c->dtype();
      b.shape = c->shape();
      b.bytes = c->nbytes();
      b.constant = c->raw_data();
      value_buffers_[node->output(0)] = add_buffer(std::move(b));
      continue;
    }
    building_ = node.get();
    // A squeeze-and-excitation Mul is lowered with the Conv whose weights it scales.
    if (is_absorbed_gate(*node)) continue;
    // A Conv lowered later, at the Add it feeds, has not run yet.
    const bool delayed = node->kind() == OpKind::kConv && sum_partner(node.get()) != nullptr;
    if (!delayed) done_.insert(node.get());
    if (add_view(*node)) continue;
    if (node->kind() == OpKind::kIf) {
      // Its branches decide their threads for themselves; one that cannot be planned leaves the
      // whole graph to the interpreter.
      KILN_ASSIGN_OR_RETURN(bool lowered, lower_if(*this, *node));
      if (!lowered) return false;
      continue;
    }
    // A node with little work runs on one thread: waking the team costs more than it saves.
    const size_t first_step = steps_.size();
    const bool one_thread = is_small(*node);
    {
      // Primitives (and kernel-table kernels) take the team size they are made with.
      const TeamOfOne team(one_thread);
      KILN_RETURN_IF_ERROR(lower_node(*node));
    }
    for (size_t i = first_step; one_thread && i < steps_.size(); ++i) steps_[i]->one_thread = true;
    // Weights packed into this node's steps go now, not at the end: the peak holds them once.
    for (const Value* v : node->inputs()) {
      if (v != nullptr) release_if_unread(v);
    }
  }
  // Those whose last user was fused into another node's step (a bias Add's constant).
  for (const auto& node : graph_.nodes()) {
    if (node->kind() == OpKind::kConstant) release_if_unread(node->output(0));
  }
  return true;
}

Result<std::unique_ptr<Program>> ProgramBuilder::build_program() {
  if (std::string why = runtime::why_not_plannable(graph_, /*if_nodes=*/true); !why.empty()) {
    log(LogLevel::kDebug, "cpu target: the interpreter runs graph \"{}\": {}", graph_.name(), why);
    return std::unique_ptr<Program>();
  }
  for (size_t i = 0; i < graph_.inputs().size(); ++i) {
    const Value* v = graph_.inputs()[i];
    Buffer b;
    b.kind = Buffer::Kind::kInput;
    b.dtype = v->tensor_type().dtype;
    b.shape = v->tensor_type().shape();
    b.bytes = byte_size(b.dtype, b.shape);
    b.index = static_cast<int>(i);
    value_buffers_[v] = add_buffer(std::move(b));
  }
  for (size_t i = 0; i < captures_.size(); ++i) {
    const Value* v = captures_[i];
    Buffer b;
    b.dtype = v->tensor_type().dtype;
    b.shape = v->tensor_type().shape();
    b.bytes = byte_size(b.dtype, b.shape);
    if (const Tensor* c = v->constant_value(); c != nullptr) {
      b.kind = Buffer::Kind::kConstant;
      b.constant = c->raw_data();
    } else {
      b.kind = Buffer::Kind::kInput;
      b.index = static_cast<int>(graph_.inputs().size() + i);
    }
    value_buffers_[v] = add_buffer(std::move(b));
  }
  plan_sum_fusion();
  KILN_ASSIGN_OR_RETURN(conv_layout_, choose_conv_layout(graph_));
  KILN_RETURN_IF_ERROR(check_conv_flags());
  // A model with little work in all (a voice-activity or wake-word model) runs on one thread from
  // end to end: handing tiny steps to a team costs more than they take, and a busy machine makes
  // each wake-up of a descheduled thread cost a time slice.
  int64_t total_work = 0;
  for (const auto& node : graph_.nodes()) total_work += work_of(*node);
  one_thread_ = total_work <= kSmallProgramWork;
  log(LogLevel::kDebug, "cpu program \"{}\": work {} ({})", graph_.name(), total_work,
      one_thread_ ? "one thread" : "team");
  std::vector<int> outputs;
  {
    const TeamOfOne team(one_thread_);  // primitives take their team size when made
    KILN_ASSIGN_OR_RETURN(bool built, lower_nodes());
    if (!built) return std::unique_ptr<Program>();
    building_ = nullptr;
    for (const Value* v : graph_.outputs()) {
      int id = buffer_of(v);
      if (!buffer(id).is_plain()) id = plain(v);
      outputs.push_back(id);
    }
  }
  if (one_thread_) {
    for (auto& step : steps_) step->one_thread = true;
  }
  // Outputs read after the last step stay live to the end (a view's, the buffer it views).
  std::vector<int> read_last;
  for (int id : outputs) {
    read_last.push_back(buffer(id).kind == Buffer::Kind::kView ? buffer(id).view_of : id);
  }
  MemoryPlan plan = plan_arena({}, read_last, kArenaAlignment, [](const Buffer& b) {
    return BufferLifetime{b.kind == Buffer::Kind::kArena ? b.bytes : 0, b.first, b.last};
  });
  std::unordered_set<const Node*> on_dnnl = fused_;
  for (const auto& step : steps_) {
    if (step->kind != "Reorder" && dynamic_cast<const PrimitiveStep*>(step.get()) != nullptr) {
      on_dnnl.insert(step->node);
    }
  }
  if (kernels_ != nullptr) {
    for (const auto& [node, kernel] : *kernels_) on_dnnl.insert(node);
  }
  return std::make_unique<Program>(engine_, std::move(buffers_), std::move(steps_),
                                   std::move(outputs), std::move(plan), seed_,
                                   static_cast<int>(on_dnnl.size()), one_thread_);
}

}  // namespace kiln::compiler::cpu
