// SPDX-License-Identifier: Apache-2.0
// In-place channel Concats (a DenseNet block's growing list in one buffer) and the per-channel
// BatchNormalization(+Relu) pass that reads their strided views.
#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "compiler/ops/all_ops.h"
#include "compiler/passes/rewrite.h"
#include "compiler/targets/cpu/dnnl_kernel.h"
#include "compiler/targets/cpu/program.h"

namespace kiln::compiler::cpu {

namespace {

using dnnl::memory;

bool is_static_f32(const Value* v) {
  return v != nullptr && v->type().is_tensor() && v->tensor_type().dtype == DType::kF32 &&
         v->tensor_type().is_static() && v->tensor_type().shape().rank() == 4;
}

// Concat along channels of static f32 rank-4 inputs, none repeated.
bool is_channel_concat(const Node& node) {
  if (node.kind() != OpKind::kConcat || node.num_inputs() < 1 || !is_static_f32(node.output(0))) {
    return false;
  }
  int64_t axis = node.attrs<ops::Concat>().axis.value_or(0);
  if (axis < 0) axis += 4;
  if (axis != 1) return false;
  for (int i = 0; i < node.num_inputs(); ++i) {
    if (!is_static_f32(node.input(i))) return false;
    for (int j = 0; j < i; ++j) {
      if (node.input(j) == node.input(i)) return false;
    }
  }
  return true;
}

// The per-channel scale and shift of an inference BatchNormalization with constant parameters,
// when a strided view can feed it (a Relu that is its only user is fused: `relu` set).
struct ScaleShift {
  std::vector<float> scale;
  std::vector<float> shift;
  const Node* relu = nullptr;
  const Value* out = nullptr;
};

std::optional<ScaleShift> scale_shift_of(const Node& bn) {
  if (bn.kind() != OpKind::kBatchNormalization || bn.num_inputs() != 5 ||
      !is_static_f32(bn.input(0)) || !is_static_f32(bn.output(0))) {
    return std::nullopt;
  }
  const auto& op = bn.attrs<ops::BatchNormalization>();
  if (op.training_mode != 0) return std::nullopt;
  for (int i = 1; i < bn.num_outputs(); ++i) {
    if (!bn.output(i)->uses().empty() || is_graph_output(bn.output(i))) return std::nullopt;
  }
  const int64_t channels = bn.input(0)->tensor_type().shape()[1];
  const Tensor* p[4];
  for (int i = 0; i < 4; ++i) {
    p[i] = bn.input(i + 1)->constant_value();
    if (p[i] == nullptr || p[i]->dtype() != DType::kF32 || p[i]->numel() != channels) {
      return std::nullopt;
    }
  }
  ScaleShift s;
  for (int64_t c = 0; c < channels; ++c) {
    const double scale = p[0]->data<float>()[c] /
                         std::sqrt(static_cast<double>(p[3]->data<float>()[c]) + op.epsilon);
    s.scale.push_back(static_cast<float>(scale));
    s.shift.push_back(static_cast<float>(p[1]->data<float>()[c] - p[2]->data<float>()[c] * scale));
  }
  s.out = bn.output(0);
  const Value* y = bn.output(0);
  if (y->uses().size() == 1 && !is_graph_output(y)) {
    const Node* next = y->uses()[0].node;
    if (next->kind() == OpKind::kRelu && next->graph() == bn.graph() &&
        is_static_f32(next->output(0))) {
      s.relu = next;
      s.out = next->output(0);
    }
  }
  return s;
}

// The Concat whose inputs start with all of `node`'s, the longest of those reading `node`'s first
// input, when it and at least one other Concat share the list (else nullptr).
const Node* concat_owner(const Node& node) {
  if (!is_channel_concat(node)) return nullptr;
  const Shape& y = node.output(0)->tensor_type().shape();
  const Node* owner = &node;
  int sharing = 0;
  for (const Use& u : node.input(0)->uses()) {
    const Node* other = u.node;
    if (u.index != 0 || other->graph() != node.graph() || !is_channel_concat(*other)) continue;
    const Shape& z = other->output(0)->tensor_type().shape();
    if (z[0] != y[0] || z[2] != y[2] || z[3] != y[3]) continue;
    // One list must start with the other.
    const Node* shorter = other->num_inputs() < owner->num_inputs() ? other : owner;
    const Node* longer = shorter == other ? owner : other;
    bool prefix = true;
    for (int i = 0; i < shorter->num_inputs() && prefix; ++i) {
      prefix = shorter->input(i) == longer->input(i);
    }
    if (!prefix) continue;
    owner = longer;
    ++sharing;
  }
  // Every Concat sharing the list must start like the owner (checked against `node` here: the
  // owner's own lowering checks itself).
  for (int i = 0; i < node.num_inputs(); ++i) {
    if (node.input(i) != owner->input(i)) return nullptr;
  }
  return sharing >= 2 ? owner : nullptr;
}

// Strides (in elements) of a dense `dims` tensor in `layout`'s dim order, for a layout without
// inner blocks; nullopt for a blocked one.
std::optional<memory::dims> strides_like(const memory::desc& layout, const memory::dims& dims) {
  const dnnl_memory_desc_t& md = layout.data;
  if (md.format_kind != dnnl_blocked || md.format_desc.blocking.inner_nblks != 0 ||
      md.ndims != static_cast<int>(dims.size())) {
    return std::nullopt;
  }
  std::vector<int> order(dims.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::stable_sort(order.begin(), order.end(), [&](int a, int c) {
    return md.format_desc.blocking.strides[a] > md.format_desc.blocking.strides[c];
  });
  memory::dims strides(dims.size());
  memory::dim stride = 1;
  for (size_t i = order.size(); i-- > 0;) {
    strides[static_cast<size_t>(order[i])] = stride;
    stride *= dims[static_cast<size_t>(order[i])];
  }
  return strides;
}

// A BatchNormalization(+Relu) as relu?(x * scale + shift) per channel, reading a strided 4-D
// view (channels innermost with one stride per pixel, or contiguous H x W planes) and writing a
// dense tensor in the same dim order.
class ScaleShiftStep final : public Step {
 public:
  ScaleShiftStep(ScaleShift s, memory::dims dims, memory::dims strides)
      : s_(std::move(s)), dims_(std::move(dims)), strides_(std::move(strides)) {}

  Status run(StepContext& ctx) const override {
    const float* x = static_cast<const float*>(ctx.data[static_cast<size_t>(reads[0])]);
    float* y = static_cast<float*>(ctx.data[static_cast<size_t>(writes[0])]);
    const float* scale = s_.scale.data();
    const float* shift = s_.shift.data();
    const bool relu = s_.relu != nullptr;
    const int64_t n = dims_[0];
    const int64_t c = dims_[1];
    const int64_t hw = dims_[2] * dims_[3];
    if (strides_[1] == 1) {
      const int64_t pixel = strides_[3];
      const int64_t pixels = n * hw;
#pragma omp parallel for schedule(static)
      for (int64_t p = 0; p < pixels; ++p) {
        const float* in = x + p * pixel;
        float* out = y + p * c;
        if (relu) {
#pragma omp simd
          for (int64_t k = 0; k < c; ++k) out[k] = std::max(in[k] * scale[k] + shift[k], 0.0f);
        } else {
#pragma omp simd
          for (int64_t k = 0; k < c; ++k) out[k] = in[k] * scale[k] + shift[k];
        }
      }
    } else {
      const int64_t planes = n * c;
#pragma omp parallel for schedule(static)
      for (int64_t p = 0; p < planes; ++p) {
        const int64_t k = p % c;
        const float* in = x + (p / c) * strides_[0] + k * strides_[1];
        float* out = y + p * hw;
        const float a = scale[k];
        const float b = shift[k];
        if (relu) {
#pragma omp simd
          for (int64_t i = 0; i < hw; ++i) out[i] = std::max(in[i] * a + b, 0.0f);
        } else {
#pragma omp simd
          for (int64_t i = 0; i < hw; ++i) out[i] = in[i] * a + b;
        }
      }
    }
    return Status();
  }

 private:
  ScaleShift s_;
  memory::dims dims_;
  memory::dims strides_;
};

// The element strides of a view `layout` the scale-shift pass reads: channels innermost with a
// uniform pixel stride, or contiguous H x W planes.
std::optional<memory::dims> readable_strides(const memory::desc& layout) {
  const dnnl_memory_desc_t& md = layout.data;
  if (layout.is_zero() || md.format_kind != dnnl_blocked || md.ndims != 4 ||
      md.format_desc.blocking.inner_nblks != 0 || md.offset0 != 0) {
    return std::nullopt;
  }
  const dnnl_dims_t& s = md.format_desc.blocking.strides;
  const memory::dims strides(s, s + 4);
  const memory::dim w = md.dims[3];
  const memory::dim h = md.dims[2];
  const bool channels_last = s[1] == 1 && s[2] == w * s[3] && s[0] == h * s[2];
  const bool planar = s[3] == 1 && s[2] == w;
  if (!channels_last && !planar) return std::nullopt;
  return strides;
}

}  // namespace

bool lower_inplace_concat(ProgramBuilder& b, const Node& node) {
  const Node* owner = concat_owner(node);
  if (owner == nullptr) return false;
  const Value* y = node.output(0);
  const bool full = owner == &node;
  if (!full) {
    // Only the scale-shift pass reads the view of the first channels.
    if (is_graph_output(y)) return false;
    for (const Use& u : y->uses()) {
      if (!scale_shift_of(*u.node)) return false;
    }
  }
  const Value* all = owner->output(0);
  const Shape& shape = all->tensor_type().shape();
  int base = -1;
  if (b.has_buffer(all)) {
    base = b.buffer_of(all);
  } else {
    // The layout of the first input (channels last between oneDNN's convolutions), unblocked.
    std::optional<memory::dims> strides = strides_like(b.layout_of(node.input(0)), to_dims(shape));
    if (!strides) return false;
    base = b.define(all, memory::desc(to_dims(shape), memory::data_type::f32, *strides));
  }
  const memory::desc& layout = b.buffer(base).layout;
  if (layout.is_zero() || b.buffer(base).kind == Buffer::Kind::kView) return false;
  const dnnl_dims_t& strides = layout.data.format_desc.blocking.strides;
  const memory::dims base_strides(strides, strides + 4);
  auto view_layout = [&](const Shape& s) {
    return memory::desc(to_dims(s), memory::data_type::f32, base_strides);
  };
  int64_t channel = 0;
  for (const Value* x : node.inputs()) {
    const Shape& xs = x->tensor_type().shape();
    if (!b.is_placed(x, base)) {
      const memory::desc to = view_layout(xs);
      const size_t offset = static_cast<size_t>(channel * base_strides[1]) * sizeof(float);
      const int slice = b.slice(base, offset, xs, to);
      const int from = b.buffer_of(x);
      const memory::desc from_layout = b.layout_of(x);
      dnnl::reorder copy(dnnl::reorder::primitive_desc(b.engine(), from_layout, b.engine(), to));
      auto step = std::make_unique<PrimitiveStep>(
          b.engine(), copy,
          std::vector<PrimitiveStep::Arg>{{DNNL_ARG_SRC, from, from_layout, {}},
                                          {DNNL_ARG_DST, slice, to, {}}});
      step->node = &node;
      step->kind = "Concat (in place)";
      step->reads = {from};
      step->writes = {slice};
      b.add_step(std::move(step));
      b.place(x, base);
    }
    channel += xs[1];
  }
  if (!full)
    b.rebind(y, b.slice(base, 0, y->tensor_type().shape(), view_layout(y->tensor_type().shape())));
  return true;
}

bool lower_strided_batch_norm(ProgramBuilder& b, const Node& node) {
  if (!b.has_buffer(node.input(0)) ||
      b.buffer(b.buffer_of(node.input(0))).kind != Buffer::Kind::kView) {
    return false;
  }
  std::optional<memory::dims> strides = readable_strides(b.layout_of(node.input(0)));
  if (!strides) return false;
  std::optional<ScaleShift> s = scale_shift_of(node);
  if (!s) return false;
  const memory::dims dims = to_dims(node.input(0)->tensor_type().shape());
  std::optional<memory::dims> dense = strides_like(b.layout_of(node.input(0)), dims);
  if (!dense) return false;
  const Value* out = s->out;
  const Node* relu = s->relu;
  const int in = b.buffer_of(node.input(0));
  const int id = b.define(out, memory::desc(dims, memory::data_type::f32, *dense));
  auto step = std::make_unique<ScaleShiftStep>(std::move(*s), dims, std::move(*strides));
  step->node = &node;
  step->kind = relu != nullptr ? "BatchNormalization+Relu" : "BatchNormalization";
  step->reads = {in};
  step->writes = {id};
  b.add_step(std::move(step));
  if (relu != nullptr) b.mark_fused(relu);
  return true;
}

}  // namespace kiln::compiler::cpu
